// Which driver a CUDA runtime needs (NVIDIA's CUDA compatibility tables).
#include "kernels/device_query.h"

namespace tune {

int minimum_driver_branch(int runtime_version) {
    if (runtime_version >= 13000) return 580;
    if (runtime_version >= 12000) return 525;
    if (runtime_version >= 11000) return 450;
    return 0;
}

}  // namespace tune
