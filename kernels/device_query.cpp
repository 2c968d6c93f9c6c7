// Build without the CUDA backend: there is never a device to find.
#ifndef TUNE_HAVE_CUDA
#include "kernels/device_query.h"

namespace tune {

DeviceQuery query_devices() {
    DeviceQuery q;
    q.cuda_compiled = false;
    q.why_none = "this build of tune has no CUDA backend (configured with TUNE_CUDA=OFF or nvcc was not found)";
    return q;
}

}  // namespace tune
#endif
