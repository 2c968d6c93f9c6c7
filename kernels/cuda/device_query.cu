// Device discovery through the CUDA runtime, without creating a context:
// only the device count and properties (no cudaSetDevice, which creates the
// primary context since CUDA 12, and no cudaMemGetInfo, which needs one);
// free memory comes from NVML. With no driver or no GPU, the runtime's own
// error string says why, and nothing throws.
#include <cuda_runtime.h>

#include "kernels/cuda/host/nvml_memory.h"
#include "kernels/device_query.h"

namespace tune {

DeviceQuery query_devices() {
    DeviceQuery q;
    q.cuda_compiled = true;
    cudaRuntimeGetVersion(&q.runtime_version);
    cudaDriverGetVersion(&q.driver_version);  // 0 when no driver is installed

    int count = 0;
    const cudaError_t status = cudaGetDeviceCount(&count);
    if (q.driver_version == 0) {
        q.why_none = "no NVIDIA driver is installed (cudaDriverGetVersion reports none)";
        return q;
    }
    if (status != cudaSuccess) {
        q.why_none = std::string("cudaGetDeviceCount: ") + cudaGetErrorName(status) + ": " + cudaGetErrorString(status);
        cudaGetLastError();  // clear the sticky-free error so later calls start clean
        return q;
    }
    if (count == 0) {
        q.why_none = "the CUDA driver reports 0 devices (check CUDA_VISIBLE_DEVICES)";
        return q;
    }
    for (int i = 0; i < count; ++i) {
        cudaDeviceProp prop{};
        if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) continue;
        VisibleDevice d;
        d.index = i;
        d.name = prop.name;
        d.total_memory = prop.totalGlobalMem;
        d.compute_major = prop.major;
        d.compute_minor = prop.minor;
        d.multiprocessors = prop.multiProcessorCount;
        char bus_id[32] = {};
        if (cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, i) == cudaSuccess)
            d.free_memory = kernels::cuda::nvml_free_memory(bus_id).value_or(0);
        q.devices.push_back(d);
    }
    return q;
}

}  // namespace tune
