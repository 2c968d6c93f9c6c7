// Device memory a GPU trial uses outside the tagged allocator (the
// `overhead` component): the CUDA context, cuBLASLt's handle, the backend's
// scratch, GEMM tuning scratch, and what the stream-ordered pool reserved
// beyond the largest total the trainer allocated (allocation granularity).
// The estimator predicts it as Hardware::runtime_overhead_bytes and the
// sweep driver learns it from these measurements.
#pragma once

#include <cstdint>

#include "kernels/cuda/cuda_backend.h"

namespace tune::harness {

std::uint64_t device_overhead_bytes(const kernels::CudaMemoryStats& stats, std::uint64_t allocator_peak);

}  // namespace tune::harness
