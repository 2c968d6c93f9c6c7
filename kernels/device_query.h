// What accelerators this process can see. Used by `tune devices`, the sweep
// driver (estimate-only when none) and the trial's device binding.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tune {

struct VisibleDevice {
    int index = 0;
    std::string name;              // as the driver reports it, e.g. "NVIDIA H100 80GB HBM3"
    std::uint64_t total_memory = 0;
    std::uint64_t free_memory = 0;
    int compute_major = 0;
    int compute_minor = 0;
    int multiprocessors = 0;
};

struct DeviceQuery {
    std::vector<VisibleDevice> devices;
    std::string why_none;          // filled when devices is empty
    bool cuda_compiled = false;    // whether this binary has the CUDA backend at all
    int runtime_version = 0;       // CUDA runtime, e.g. 13000
    int driver_version = 0;        // 0 when no driver is installed
};

DeviceQuery query_devices();

}  // namespace tune
