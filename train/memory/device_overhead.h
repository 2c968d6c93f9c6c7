// Device memory a GPU trial uses outside the tagged allocator (the
// `overhead` component): the CUDA context, cuBLASLt's handle, the backend's
// scratch, and what the stream-ordered pool and the device pages held
// beyond the largest total the trainer allocated (allocation granularity,
// pages' rounding, and what the pool keeps of the GEMM tuning scratch). The
// trial resets the pool's high-water marks after the warm-up steps, so the
// tuning spike does not pin them. The estimator starts from the device
// baseline the sweep's probes measured (else Hardware::runtime_overhead_bytes)
// and the sweep driver learns it from these measurements, as a line in the
// activations (driver/calibration.h).
#pragma once

#include <cstdint>

#include "kernels/cuda/cuda_backend.h"

namespace tune::train {

std::uint64_t device_overhead_bytes(const kernels::CudaMemoryStats& stats, std::uint64_t allocator_peak);

}  // namespace tune::train
