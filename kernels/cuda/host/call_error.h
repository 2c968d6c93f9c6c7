// The typed error a failed CUDA, cuBLAS(Lt), NCCL or cuDNN call becomes: which
// library, its status code and name, the call as written, and the file and
// line it was made from. Plain C++ (no CUDA headers), so the message format
// is tested on machines without CUDA and caught by code that never sees CUDA.
#pragma once

#include <string>
#include <string_view>

#include "kernels/error.h"

namespace tune::kernels::cuda {

enum class Library { cuda, cublas, nccl, cudnn };

std::string_view library_name(Library library);

// Where a call was made: the macros in cuda_check.cuh fill it from
// #call, __FILE__ and __LINE__.
struct CallSite {
    const char* call = "";
    const char* file = "";
    int line = 0;
};

// One failed call, with the library's own name and description of the code.
struct CallFailure {
    Library library = Library::cuda;
    int code = 0;
    std::string code_name;    // "cudaErrorInvalidValue", "CUBLAS_STATUS_NOT_SUPPORTED"
    std::string description;  // the library's sentence for it
    CallSite site;
};

// "cuda: cudaMemcpyAsync(dst, src, n, kind, stream) failed with cudaErrorInvalidValue (1):
//  invalid argument at kernels/cuda/cuda_backend.cu:42"
std::string describe(const CallFailure& failure);

// A BackendError that keeps the failure's parts for callers that inspect them.
class CallError : public BackendError {
public:
    explicit CallError(CallFailure failure) : BackendError(describe(failure)), failure_(std::move(failure)) {}
    const CallFailure& failure() const { return failure_; }

private:
    CallFailure failure_;
};

}  // namespace tune::kernels::cuda
