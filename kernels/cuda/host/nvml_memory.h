// Free device memory from NVML, which reads the driver's figures without a
// CUDA context. query_devices() uses it so that listing the GPUs (from every
// rank, and from the long-lived sweep driver) never creates a context on
// them: a context costs 0.3-0.6 GB on each device and fails outright on
// EXCLUSIVE_PROCESS GPUs that a trial holds. NVML is loaded at run time
// (dlopen of the driver's libnvidia-ml.so.1), so machines without a driver
// run the same binary; there it answers nullopt.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace tune::kernels::cuda {

// Free bytes of the device at `pci_bus_id` ("0000:3B:00.0", as
// cudaDeviceGetPCIBusId writes it), or nullopt when NVML cannot say.
std::optional<std::uint64_t> nvml_free_memory(const std::string& pci_bus_id);

}  // namespace tune::kernels::cuda
