// Names and descriptions of library status codes, and the error each becomes.
#include "kernels/cuda/status.h"

#include <cublas_api.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <string>

#include "kernels/cuda/host/cudnn_enums.h"

namespace tune::kernels::cuda {

CallFailure cuda_failure(int code, CallSite site) {
    const auto status = static_cast<cudaError_t>(code);
    return {Library::cuda, code, cudaGetErrorName(status), cudaGetErrorString(status), site};
}

CallFailure cublas_failure(int code, CallSite site) {
    const auto status = static_cast<cublasStatus_t>(code);
    return {Library::cublas, code, cublasGetStatusName(status), cublasGetStatusString(status), site};
}

CallFailure nccl_failure(int code, CallSite site) {
    const auto status = static_cast<ncclResult_t>(code);
    // NCCL has no name function: its one string serves as both.
    std::string name;
    switch (status) {
        case ncclSuccess:
            name = "ncclSuccess";
            break;
        case ncclUnhandledCudaError:
            name = "ncclUnhandledCudaError";
            break;
        case ncclSystemError:
            name = "ncclSystemError";
            break;
        case ncclInternalError:
            name = "ncclInternalError";
            break;
        case ncclInvalidArgument:
            name = "ncclInvalidArgument";
            break;
        case ncclInvalidUsage:
            name = "ncclInvalidUsage";
            break;
        case ncclRemoteError:
            name = "ncclRemoteError";
            break;
        case ncclInProgress:
            name = "ncclInProgress";
            break;
        default:
            name = "ncclResult " + std::to_string(code);
            break;
    }
    return {Library::nccl, code, name, ncclGetErrorString(status), site};
}

bool is_out_of_memory(const CallFailure& f) {
    switch (f.library) {
        case Library::cuda:
            return f.code == cudaErrorMemoryAllocation;
        case Library::cublas:
            return f.code == CUBLAS_STATUS_ALLOC_FAILED;
        case Library::nccl:
            return false;  // NCCL folds allocation failures into ncclSystemError/ncclUnhandledCudaError
        case Library::cudnn:
            return f.code == cudnn::kStatusDeviceAllocationFailed;
    }
    return false;
}

void raise(const CallFailure& f) {
    // The failing call did not say how much it wanted: requested and live are unknown (0).
    if (is_out_of_memory(f)) throw OutOfMemoryError(0, 0, describe(f));
    throw CallError(f);
}

}  // namespace tune::kernels::cuda
