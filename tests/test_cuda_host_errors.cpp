// Failed CUDA, cuBLAS and NCCL calls as typed errors with call, file and
// line: the message format everywhere, the real status codes when the CUDA
// libraries are linked (no device is needed to name a status).
#include <catch2/catch.hpp>

#include "kernels/cuda/host/call_error.h"
#include "kernels/error.h"

#ifdef TUNE_HAVE_CUDA
#include <cublas_api.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include "kernels/cuda/status.h"
#endif

using namespace tune::kernels::cuda;

TEST_CASE("a call failure names library, call, code, description and location") {
    CallFailure f{Library::cublas, 15, "CUBLAS_STATUS_NOT_SUPPORTED", "the functionality requested is not supported",
                  CallSite{"cublasLtMatmul(handle, ...)", "/home/ci/tune/kernels/cuda/gemm_lt.cu", 214}};
    const std::string m = describe(f);
    CHECK(m ==
          "cublas: cublasLtMatmul(handle, ...) failed with CUBLAS_STATUS_NOT_SUPPORTED (15): the functionality "
          "requested is not supported at kernels/cuda/gemm_lt.cu:214");
}

TEST_CASE("a CallError is a BackendError that keeps its parts") {
    CallFailure f{Library::nccl, 3, "ncclInternalError", "internal error", CallSite{"ncclAllReduce(...)", "x.cpp", 7}};
    try {
        throw CallError(f);
    } catch (const tune::BackendError& e) {
        const auto* call = dynamic_cast<const CallError*>(&e);
        REQUIRE(call != nullptr);
        CHECK(call->failure().code == 3);
        CHECK(call->failure().site.line == 7);
        CHECK(std::string(e.what()).find("nccl: ncclAllReduce(...) failed") == 0);
    }
}

TEST_CASE("library names") {
    CHECK(library_name(Library::cuda) == "cuda");
    CHECK(library_name(Library::cublas) == "cublas");
    CHECK(library_name(Library::nccl) == "nccl");
}

#ifdef TUNE_HAVE_CUDA

TEST_CASE("CUDA runtime codes are named by the runtime") {
    const CallFailure f = cuda_failure(cudaErrorInvalidValue, CallSite{"cudaMemcpyAsync(d, s, n, k, st)", "a.cu", 3});
    CHECK(f.code_name == "cudaErrorInvalidValue");
    CHECK_FALSE(f.description.empty());
    CHECK(describe(f).find("cuda: cudaMemcpyAsync(d, s, n, k, st) failed with cudaErrorInvalidValue (1)") == 0);
    CHECK_FALSE(is_out_of_memory(f));
    CHECK_THROWS_AS(raise(f), CallError);
}

TEST_CASE("running out of device memory becomes OutOfMemoryError, with the call in its message") {
    const CallFailure cuda = cuda_failure(cudaErrorMemoryAllocation, CallSite{"cudaMalloc(&p, n)", "b.cu", 9});
    CHECK(is_out_of_memory(cuda));
    try {
        raise(cuda);
        FAIL("raise returned");
    } catch (const tune::OutOfMemoryError& e) {
        CHECK(std::string(e.what()).find("cudaMalloc(&p, n)") != std::string::npos);
        CHECK(std::string(e.what()).find("b.cu:9") != std::string::npos);
    }
    const CallFailure cublas = cublas_failure(CUBLAS_STATUS_ALLOC_FAILED, CallSite{"cublasLtCreate(&h)", "c.cu", 1});
    CHECK(cublas.code_name == "CUBLAS_STATUS_ALLOC_FAILED");
    CHECK(is_out_of_memory(cublas));
    CHECK_THROWS_AS(raise(cublas), tune::OutOfMemoryError);
}

TEST_CASE("cuBLAS and NCCL codes are named") {
    CHECK(cublas_failure(CUBLAS_STATUS_NOT_SUPPORTED, {}).code_name == "CUBLAS_STATUS_NOT_SUPPORTED");
    CHECK(cublas_failure(CUBLAS_STATUS_INVALID_VALUE, {}).code_name == "CUBLAS_STATUS_INVALID_VALUE");
    const CallFailure n = nccl_failure(ncclInvalidArgument, CallSite{"ncclCommInitRank(...)", "comm.cpp", 40});
    CHECK(n.code_name == "ncclInvalidArgument");
    CHECK_FALSE(n.description.empty());
    CHECK_FALSE(is_out_of_memory(n));
    CHECK_THROWS_AS(raise(n), CallError);
    CHECK(nccl_failure(99, {}).code_name == "ncclResult 99");
}

#endif
