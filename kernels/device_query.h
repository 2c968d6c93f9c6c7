// What accelerators this process can see. Used by `tune devices`, the sweep
// driver (estimate-only when none) and the trial's device binding.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tune {

struct VisibleDevice {
    int index = 0;
    std::string name;  // as the driver reports it, e.g. "NVIDIA H100 80GB HBM3"
    std::uint64_t total_memory = 0;
    std::uint64_t free_memory = 0;  // from NVML; 0 when it cannot say
    int compute_major = 0;
    int compute_minor = 0;
    int multiprocessors = 0;
};

struct DeviceQuery {
    std::vector<VisibleDevice> devices;
    std::string why_none;        // filled when devices is empty
    bool cuda_compiled = false;  // whether this binary has the CUDA backend at all
    int runtime_version = 0;     // CUDA runtime, e.g. 13000
    int driver_version = 0;      // 0 when no driver is installed
};

// The oldest NVIDIA driver branch that runs a CUDA runtime of this version
// (12000 = 12.0): CUDA 13 needs R580, CUDA 12.x R525 (minor-version
// compatibility), CUDA 11.x R450. 0 when unknown (no runtime).
int minimum_driver_branch(int runtime_version);

// Creates no CUDA context on any device (kernels/cuda/device_query.cu).
DeviceQuery query_devices();

}  // namespace tune
