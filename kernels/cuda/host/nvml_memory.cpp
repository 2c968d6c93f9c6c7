// NVML through dlopen: the three calls tune needs, declared here with NVML's
// C signatures so no NVML header or link dependency is needed.
#include "kernels/cuda/host/nvml_memory.h"

#include <dlfcn.h>

namespace tune::kernels::cuda {

namespace {

struct NvmlMemory {  // nvmlMemory_t
    unsigned long long total, free, used;
};
using NvmlDevice = void*;
using InitFn = int (*)();
using ShutdownFn = int (*)();
using ByPciFn = int (*)(const char*, NvmlDevice*);
using MemoryFn = int (*)(NvmlDevice, NvmlMemory*);

// dlclose on every exit path.
struct Library {
    void* handle = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    ~Library() {
        if (handle != nullptr) dlclose(handle);
    }
    template <class Fn>
    Fn get(const char* name) const {
        return handle != nullptr ? reinterpret_cast<Fn>(dlsym(handle, name)) : nullptr;
    }
};

}  // namespace

std::optional<std::uint64_t> nvml_free_memory(const std::string& pci_bus_id) {
    const Library lib;
    const auto init = lib.get<InitFn>("nvmlInit_v2");
    const auto shutdown = lib.get<ShutdownFn>("nvmlShutdown");
    const auto by_pci = lib.get<ByPciFn>("nvmlDeviceGetHandleByPciBusId_v2");
    const auto memory = lib.get<MemoryFn>("nvmlDeviceGetMemoryInfo");
    if (init == nullptr || shutdown == nullptr || by_pci == nullptr || memory == nullptr || init() != 0)
        return std::nullopt;
    std::optional<std::uint64_t> free_bytes;
    NvmlDevice device = nullptr;
    NvmlMemory m{};
    if (by_pci(pci_bus_id.c_str(), &device) == 0 && memory(device, &m) == 0) free_bytes = m.free;
    shutdown();
    return free_bytes;
}

}  // namespace tune::kernels::cuda
