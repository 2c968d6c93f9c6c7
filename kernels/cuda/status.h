// Failed CUDA runtime, cuBLAS(Lt) and NCCL status codes as typed errors.
// Takes the codes as plain ints so callers (and tests) need no CUDA headers;
// the names and sentences come from the libraries themselves.
#pragma once

#include "kernels/cuda/host/call_error.h"

namespace tune::kernels::cuda {

CallFailure cuda_failure(int code, CallSite site);    // cudaError_t
CallFailure cublas_failure(int code, CallSite site);  // cublasStatus_t
CallFailure nccl_failure(int code, CallSite site);    // ncclResult_t

// Whether the failure means the device ran out of memory (the trial reports
// status `oom`, not `failed`).
bool is_out_of_memory(const CallFailure& failure);

// Throws OutOfMemoryError for an out-of-memory failure, CallError otherwise.
[[noreturn]] void raise(const CallFailure& failure);

}  // namespace tune::kernels::cuda
