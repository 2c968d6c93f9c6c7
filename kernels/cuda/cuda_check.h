// Checks on every CUDA runtime, cuBLAS(Lt) and NCCL call: a failure becomes a
// typed exception carrying the call as written, its file and line (see
// status.h); nothing here prints or exits. Usable from .cpp and .cu alike.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include "kernels/cuda/status.h"

namespace tune::kernels::cuda {

inline void check_cuda(cudaError_t status, CallSite site) {
    if (status != cudaSuccess) {
        cudaGetLastError();  // clear a non-sticky error so the process can go on reporting
        raise(cuda_failure(static_cast<int>(status), site));
    }
}

inline void check_cublas(cublasStatus_t status, CallSite site) {
    if (status != CUBLAS_STATUS_SUCCESS) raise(cublas_failure(static_cast<int>(status), site));
}

inline void check_nccl(ncclResult_t status, CallSite site) {
    if (status != ncclSuccess) raise(nccl_failure(static_cast<int>(status), site));
}

}  // namespace tune::kernels::cuda

#define TUNE_CALL_SITE(call) (::tune::kernels::cuda::CallSite{call, __FILE__, __LINE__})
#define TUNE_CUDA_CHECK(call) ::tune::kernels::cuda::check_cuda((call), TUNE_CALL_SITE(#call))
#define TUNE_CUBLAS_CHECK(call) ::tune::kernels::cuda::check_cublas((call), TUNE_CALL_SITE(#call))
#define TUNE_NCCL_CHECK(call) ::tune::kernels::cuda::check_nccl((call), TUNE_CALL_SITE(#call))
// After a kernel launch: launch-configuration errors surface here, at the launch site.
#define TUNE_CUDA_CHECK_LAUNCH(kernel) ::tune::kernels::cuda::check_cuda(cudaGetLastError(), TUNE_CALL_SITE(kernel))
