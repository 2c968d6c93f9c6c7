// The emulated device's own semantics: barriers, shared memory and warp
// shuffles behave as on a GPU, the bugs a GPU would hang or corrupt on are
// reported, memory runs out the way a device's does, and the emulated
// cuBLASLt refuses what cuBLASLt refuses.
#include <catch2/catch.hpp>

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/reduce.cuh"
#include "kernels/device_query.h"
#include "kernels/error.h"

namespace {

// Each thread writes its slot, then reads its neighbour's after the barrier:
// without a real barrier the neighbour's slot would still be stale.
__global__ void rotate_kernel(int* out) {
    __shared__ int slots[256];
    slots[threadIdx.x] = static_cast<int>(threadIdx.x) + 1000 * static_cast<int>(blockIdx.x);
    __syncthreads();
    out[blockIdx.x * blockDim.x + threadIdx.x] = slots[(threadIdx.x + 1) % blockDim.x];
}

__global__ void block_sum_kernel(float* out, const float* in) {
    __shared__ float shared[32];
    const float total = tune::kernels::cuda::block_sum(in[blockIdx.x * blockDim.x + threadIdx.x], shared);
    if (threadIdx.x == 0) out[blockIdx.x] = total;
}

// Thread 0 leaves before the barrier the others wait at.
__global__ void divergent_barrier_kernel(int* out) {
    if (threadIdx.x == 0) return;
    __syncthreads();
    out[threadIdx.x] = 1;
}

__global__ void partial_warp_shuffle_kernel(float* out) { out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, 1.0f, 1); }

__global__ void vote_kernel(int* out) {
    out[0] = 0;
    const int any = __syncthreads_or(threadIdx.x == 77);
    const int none = __syncthreads_or(0);
    if (threadIdx.x == 0) out[0] = any * 10 + none;
}

template <class T>
T* device_buffer(std::size_t n) {
    void* p = nullptr;
    REQUIRE(cudaMalloc(&p, n * sizeof(T)) == cudaSuccess);
    return static_cast<T*>(p);
}

}  // namespace

TEST_CASE("emulated device: __syncthreads and __shared__ memory are per block, across parallel blocks") {
    constexpr unsigned kBlocks = 6, kThreads = 256;
    int* out = device_buffer<int>(kBlocks * kThreads);
    TUNE_LAUNCH(rotate_kernel, kBlocks, kThreads, 0, nullptr)(out);
    REQUIRE(cudaGetLastError() == cudaSuccess);
    std::vector<int> host(kBlocks * kThreads);
    REQUIRE(cudaMemcpy(host.data(), out, host.size() * sizeof(int), cudaMemcpyDeviceToHost) == cudaSuccess);
    for (unsigned b = 0; b < kBlocks; ++b)
        for (unsigned t = 0; t < kThreads; ++t)
            CHECK(host[b * kThreads + t] == static_cast<int>((t + 1) % kThreads + 1000 * b));
    CHECK(cudaFree(out) == cudaSuccess);
}

TEST_CASE("emulated device: warp shuffles and the block reduction add up every thread") {
    constexpr unsigned kBlocks = 3, kThreads = 1024;
    std::vector<float> in(kBlocks * kThreads);
    std::iota(in.begin(), in.end(), 0.0f);
    float* d_in = device_buffer<float>(in.size());
    float* d_out = device_buffer<float>(kBlocks);
    REQUIRE(cudaMemcpy(d_in, in.data(), in.size() * 4, cudaMemcpyHostToDevice) == cudaSuccess);
    TUNE_LAUNCH(block_sum_kernel, kBlocks, kThreads, 0, nullptr)(d_out, d_in);
    REQUIRE(cudaGetLastError() == cudaSuccess);
    float out[kBlocks];
    REQUIRE(cudaMemcpy(out, d_out, sizeof out, cudaMemcpyDeviceToHost) == cudaSuccess);
    for (unsigned b = 0; b < kBlocks; ++b) {
        const double first = b * kThreads, last = first + kThreads - 1;
        CHECK(out[b] == Approx((first + last) * kThreads / 2).epsilon(1e-6));
    }
    cudaFree(d_in);
    cudaFree(d_out);
}

TEST_CASE("emulated device: __syncthreads_or is a block-wide vote") {
    int* out = device_buffer<int>(1);
    TUNE_LAUNCH(vote_kernel, 1, 128, 0, nullptr)(out);
    REQUIRE(cudaGetLastError() == cudaSuccess);
    int host = -1;
    REQUIRE(cudaMemcpy(&host, out, 4, cudaMemcpyDeviceToHost) == cudaSuccess);
    CHECK(host == 10);
    cudaFree(out);
}

TEST_CASE("emulated device: a barrier in divergent code and a shuffle over a partial warp fail the launch") {
    int* out = device_buffer<int>(64);
    TUNE_LAUNCH(divergent_barrier_kernel, 1, 64, 0, nullptr)(out);
    const cudaError_t divergent = cudaGetLastError();
    CHECK(divergent == cudaErrorLaunchFailure);
    CHECK_THAT(std::string(cudaGetErrorString(divergent)), Catch::Contains("divergent"));
    TUNE_LAUNCH(partial_warp_shuffle_kernel, 1, 16, 0, nullptr)(reinterpret_cast<float*>(out));
    const cudaError_t partial = cudaGetLastError();
    CHECK(partial == cudaErrorLaunchFailure);
    CHECK_THAT(std::string(cudaGetErrorString(partial)), Catch::Contains("32 lanes"));
    TUNE_LAUNCH(rotate_kernel, 1, 2048, 0, nullptr)(out);
    CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration);
    cudaFree(out);
}

TEST_CASE("emulated device: copies check that the device side is device memory") {
    std::vector<char> host(64);
    char* d = device_buffer<char>(32);
    CHECK(cudaMemcpy(d, host.data(), 32, cudaMemcpyHostToDevice) == cudaSuccess);
    CHECK(cudaMemcpy(d, host.data(), 33, cudaMemcpyHostToDevice) == cudaErrorInvalidValue);  // one byte past the end
    CHECK(cudaMemcpy(host.data(), host.data() + 32, 8, cudaMemcpyDeviceToHost) == cudaErrorInvalidValue);
    cudaGetLastError();
    cudaFree(d);
}

// A stream made with a priority holds its work until something waits for it (tests/cuda_emu/runtime/
// runtime_api.cpp), the latest a GPU may run it; other streams run theirs at once. An error of held work
// surfaces at the wait, as a GPU's asynchronous errors do.
TEST_CASE("emulated device: a deferred stream runs its work only once waited for, and reports its errors there") {
    cudaStream_t compute = nullptr, side = nullptr;
    REQUIRE(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking) == cudaSuccess);
    int least = 0, greatest = 0;
    REQUIRE(cudaDeviceGetStreamPriorityRange(&least, &greatest) == cudaSuccess);
    REQUIRE(cudaStreamCreateWithPriority(&side, cudaStreamNonBlocking, greatest) == cudaSuccess);
    cudaStream_t outside = nullptr;
    CHECK(cudaStreamCreateWithPriority(&outside, cudaStreamNonBlocking, greatest - 1) == cudaErrorInvalidValue);
    cudaGetLastError();

    char* d = device_buffer<char>(64);
    std::array<char, 64> host{};
    REQUIRE(cudaMemsetAsync(d, 0, 64, compute) == cudaSuccess);  // runs now
    REQUIRE(cudaMemsetAsync(d, 7, 64, side) == cudaSuccess);     // held
    cudaEvent_t done = nullptr;
    REQUIRE(cudaEventCreateWithFlags(&done, cudaEventDisableTiming) == cudaSuccess);
    REQUIRE(cudaEventRecord(done, side) == cudaSuccess);
    REQUIRE(cudaMemsetAsync(d + 32, 9, 32, side) == cudaSuccess);  // after the event: held past the wait
    REQUIRE(cudaMemcpy(host.data(), d, 64, cudaMemcpyDeviceToHost) == cudaSuccess);
    CHECK(host[0] == 0);  // nothing has waited for the side stream yet

    const std::uint64_t ran = tune_emu::held_work_ran();
    REQUIRE(cudaStreamWaitEvent(compute, done, 0) == cudaSuccess);
    CHECK(tune_emu::held_work_ran() - ran == 1);  // up to the event, no further
    REQUIRE(cudaMemcpy(host.data(), d, 64, cudaMemcpyDeviceToHost) == cudaSuccess);
    CHECK(host[0] == 7);
    CHECK(host[40] == 7);
    REQUIRE(cudaStreamSynchronize(side) == cudaSuccess);
    REQUIRE(cudaMemcpy(host.data(), d, 64, cudaMemcpyDeviceToHost) == cudaSuccess);
    CHECK(host[40] == 9);

    // A copy held on the side stream from memory the compute stream frees before anything waited for it
    // runs late, on freed memory: the wait reports it.
    void* gone = nullptr;
    REQUIRE(cudaMallocAsync(&gone, 64, compute) == cudaSuccess);
    REQUIRE(cudaMemcpyAsync(d, gone, 64, cudaMemcpyDefault, side) == cudaSuccess);
    REQUIRE(cudaEventRecord(done, side) == cudaSuccess);
    REQUIRE(cudaFreeAsync(gone, compute) == cudaSuccess);
    CHECK(cudaStreamWaitEvent(compute, done, 0) == cudaErrorInvalidValue);
    cudaGetLastError();

    // cudaFree synchronizes the device: what the side stream holds runs first.
    REQUIRE(cudaMemsetAsync(d, 3, 64, side) == cudaSuccess);
    char* scratch = device_buffer<char>(8);
    const std::uint64_t before_free = tune_emu::held_work_ran();
    REQUIRE(cudaFree(scratch) == cudaSuccess);
    CHECK(tune_emu::held_work_ran() - before_free == 1);

    cudaEventDestroy(done);
    cudaStreamDestroy(side);
    cudaStreamDestroy(compute);
    cudaFree(d);
}

TEST_CASE("emulated device: the backend raises OutOfMemoryError at the device's limit and goes on") {
    auto backend = tune::kernels::make_cuda_backend(0);
    const auto stats = tune::kernels::cuda_memory_stats(*backend);
    REQUIRE(stats.has_value());
    CHECK(stats->context_bytes > 0);
    CHECK(stats->cublas_bytes > 0);
    CHECK_THROWS_AS(backend->allocate(stats->total_bytes), tune::OutOfMemoryError);
    void* p = backend->allocate(1 << 20);
    backend->fill_zero(p, 1 << 20);
    backend->synchronize();
    backend->deallocate(p, 1 << 20);
    CHECK(backend->live_bytes() == 0);
}

TEST_CASE("emulated cuBLASLt refuses what cuBLASLt refuses") {
    cublasLtHandle_t handle = nullptr;
    REQUIRE(cublasLtCreate(&handle) == CUBLAS_STATUS_SUCCESS);
    cublasLtMatmulDesc_t desc = nullptr;
    REQUIRE(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F) == CUBLAS_STATUS_SUCCESS);
    // An int64 where an int32 batch count belongs is refused by its size.
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr, bad = nullptr;
    REQUIRE(cublasLtMatrixLayoutCreate(&a, CUDA_R_32F, 8, 4, 8) == CUBLAS_STATUS_SUCCESS);
    REQUIRE(cublasLtMatrixLayoutCreate(&b, CUDA_R_32F, 4, 6, 4) == CUBLAS_STATUS_SUCCESS);
    REQUIRE(cublasLtMatrixLayoutCreate(&c, CUDA_R_32F, 8, 6, 8) == CUBLAS_STATUS_SUCCESS);
    REQUIRE(cublasLtMatrixLayoutCreate(&bad, CUDA_R_32F, 8, 6, 7) == CUBLAS_STATUS_SUCCESS);  // ld < rows
    const std::int64_t wide = 2;
    CHECK(cublasLtMatrixLayoutSetAttribute(a, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &wide, sizeof wide) ==
          CUBLAS_STATUS_INVALID_VALUE);
    cublasLtMatmulPreference_t pref = nullptr;
    REQUIRE(cublasLtMatmulPreferenceCreate(&pref) == CUBLAS_STATUS_SUCCESS);
    const std::uint64_t cap = 1 << 20;
    REQUIRE(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &cap, sizeof cap) ==
            CUBLAS_STATUS_SUCCESS);
    cublasLtMatmulHeuristicResult_t found[4];
    int count = 0;
    CHECK(cublasLtMatmulAlgoGetHeuristic(handle, desc, a, b, bad, bad, pref, 4, found, &count) ==
          CUBLAS_STATUS_INVALID_VALUE);
    CHECK(cublasLtMatmulAlgoGetHeuristic(handle, desc, a, a, c, c, pref, 4, found, &count) ==
          CUBLAS_STATUS_INVALID_VALUE);  // op(A) (8, 4) times A (8, 4): k differs
    REQUIRE(cublasLtMatmulAlgoGetHeuristic(handle, desc, a, b, c, c, pref, 4, found, &count) == CUBLAS_STATUS_SUCCESS);
    REQUIRE(count > 0);

    // Default alignment promise is 256 bytes: an operand 4 bytes in is refused; C = A B otherwise.
    float* da = device_buffer<float>(8 * 4 + 1);
    float* db = device_buffer<float>(4 * 6);
    float* dc = device_buffer<float>(8 * 6);
    float* ws = device_buffer<float>(cap / 4);
    std::vector<float> ha(8 * 4 + 1, 1.0f), hb(4 * 6, 2.0f);
    cudaMemcpy(da, ha.data(), ha.size() * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(db, hb.data(), hb.size() * 4, cudaMemcpyHostToDevice);
    const float alpha = 1.0f, beta = 0.0f;
    CHECK(cublasLtMatmul(handle, desc, &alpha, da + 1, a, db, b, &beta, dc, c, dc, c, &found[0].algo, ws, cap,
                         nullptr) == CUBLAS_STATUS_NOT_SUPPORTED);
    CHECK(cublasLtMatmul(handle, desc, &alpha, da, a, db, b, &beta, dc, c, dc, c, &found[0].algo, ws, 0, nullptr) ==
          (found[0].workspaceSize > 0 ? CUBLAS_STATUS_INVALID_VALUE : CUBLAS_STATUS_SUCCESS));
    REQUIRE(cublasLtMatmul(handle, desc, &alpha, da, a, db, b, &beta, dc, c, dc, c, &found[0].algo, ws, cap, nullptr) ==
            CUBLAS_STATUS_SUCCESS);
    std::vector<float> hc(8 * 6);
    cudaMemcpy(hc.data(), dc, hc.size() * 4, cudaMemcpyDeviceToHost);
    for (float v : hc) CHECK(v == 8.0f);  // four products of 1 * 2

    for (void* p : {static_cast<void*>(da), static_cast<void*>(db), static_cast<void*>(dc), static_cast<void*>(ws)})
        cudaFree(p);
    for (auto* l : {a, b, c, bad}) cublasLtMatrixLayoutDestroy(l);
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatmulDescDestroy(desc);
    cublasLtDestroy(handle);
}

TEST_CASE("query_devices lists the device without creating a CUDA context on it") {
    // A context per foreign GPU costs 0.3-0.6 GB and fails on EXCLUSIVE_PROCESS
    // devices; the sweep driver and every rank list the GPUs.
    tune_emu::forget_context();
    const tune::DeviceQuery q = tune::query_devices();
    REQUIRE(q.devices.size() == 1);
    CHECK(q.devices[0].total_memory == tune_emu::device_memory_total());
    CHECK_FALSE(tune_emu::context_created());
    int* p = device_buffer<int>(1);  // what does create one, so the check above can fail
    CHECK(tune_emu::context_created());
    cudaFree(p);
}

TEST_CASE("a process done with the device releases its context, and a later backend makes a new one") {
    tune::kernels::make_cuda_backend(0).reset();
    CHECK(tune_emu::context_created());
    tune::kernels::release_cuda_device(0);  // what the sweep driver does after its probes
    CHECK_FALSE(tune_emu::context_created());
    auto again = tune::kernels::make_cuda_backend(0);
    CHECK(tune_emu::context_created());
}

// A 64 x 64 x 64 fp32 GEMM of zeros on a CUDA backend whose tuning scratch is capped at `limit`.
struct SquareGemm {
    std::unique_ptr<tune::kernels::Backend> backend;
    tune::kernels::GemmArgs g;
    void *a = nullptr, *c = nullptr, *ws = nullptr;
    std::uint64_t ws_bytes = 0;
    static constexpr std::uint64_t kBytes = 64 * 64 * 4;

    SquareGemm(std::uint64_t limit, float beta) {
        tune::kernels::CudaBackendOptions o;
        o.gemm_tuning_scratch_limit = limit;
        backend = tune::kernels::make_cuda_backend(o);
        g.m = g.n = g.k = 64;
        g.lda = g.ldb = g.ldc = 64;
        g.beta = beta;
        a = backend->allocate(kBytes);
        c = backend->allocate(kBytes);
        backend->fill_zero(a, kBytes);
        backend->fill_zero(c, kBytes);
        g.a = g.b = a, g.c = c;
        ws_bytes = backend->gemm_workspace_bytes(g);
        ws = backend->allocate(ws_bytes);
    }
    ~SquareGemm() {
        for (void* p : {a, c}) backend->deallocate(p, kBytes);
        backend->deallocate(ws, ws_bytes);
    }
    // Runs the GEMM n times; returns the cublasLtMatmul runs they made.
    std::uint64_t run(int n) {
        const std::uint64_t before = tune_emu::matmul_calls();
        for (int i = 0; i < n; ++i) backend->gemm(g, {ws, ws_bytes});
        backend->synchronize();
        return tune_emu::matmul_calls() - before;
    }
};

// Scratch bytes and cublasLtMatmul runs of one GEMM's first call (its plan is made and timed).
struct Tuned {
    std::uint64_t scratch = 0, runs = 0;
};

TEST_CASE("GEMM tuning: a C that is read is timed into a bounded scratch, one that is not in place at any size") {
    const auto tuned = [](std::uint64_t limit, float beta) {
        SquareGemm gemm(limit, beta);
        const std::uint64_t runs = gemm.run(1);
        return Tuned{tune::kernels::cuda_memory_stats(*gemm.backend)->gemm_tuning_bytes, runs};
    };
    // Accumulating (beta = 1): timed into a scratch copy of C, or above the limit on its own calls
    // (the first call runs once, with no scratch; the next test follows the calls after it).
    const Tuned scratch = tuned(64ull << 20, 1.0f), untimed = tuned(1024, 1.0f);
    CHECK(scratch.scratch == 64 * 64 * 4);
    CHECK(scratch.runs > 2);  // a warm-up and a timed run per candidate, then the call
    CHECK(untimed.scratch == 0);
    CHECK(untimed.runs == 1);
    // Overwriting (beta = 0): timed writing C itself, above the limit too, with no scratch.
    const Tuned in_place = tuned(1024, 0.0f);
    CHECK(in_place.scratch == 0);
    CHECK(in_place.runs == scratch.runs);
}

TEST_CASE("GEMM tuning: an accumulating GEMM that reads C from c_in is timed in place, and adds c_in") {
    SquareGemm gemm(1024, 1.0f);  // below C's 16 KiB: without c_in it could not be timed
    void* residual = gemm.backend->allocate(SquareGemm::kBytes);
    const std::vector<float> ones(64 * 64, 1.0f);
    gemm.backend->copy_to_device(residual, ones.data(), SquareGemm::kBytes);
    gemm.g.c_in = residual;
    const std::uint64_t runs = gemm.run(1);
    CHECK(runs > 2);  // every candidate timed on the first call
    CHECK(tune::kernels::cuda_memory_stats(*gemm.backend)->gemm_tuning_bytes == 0);
    std::vector<float> c(64 * 64, 0.0f), in(64 * 64, 0.0f);
    gemm.backend->copy_to_host(c.data(), gemm.c, SquareGemm::kBytes);
    gemm.backend->copy_to_host(in.data(), residual, SquareGemm::kBytes);
    CHECK(c == ones);   // 1 + the product of zeros, however many candidates ran
    CHECK(in == ones);  // only read
    gemm.backend->deallocate(residual, SquareGemm::kBytes);
}

TEST_CASE("GEMM tuning: an accumulating GEMM too large for a scratch C tries every candidate on its own calls") {
    SquareGemm gemm(1024, 1.0f);  // a limit below C's 16 KiB: no scratch copy
    const auto by_candidate = [] {
        std::array<std::uint64_t, 3> n{};
        for (int i = 0; i < 3; ++i) n[static_cast<std::size_t>(i)] = tune_emu::matmul_calls_of_candidate(i);
        return n;
    };
    const auto calls = [&](int n) {
        const auto before = by_candidate();
        CHECK(gemm.run(n) == static_cast<std::uint64_t>(n));  // each call runs once, no extra
        auto after = by_candidate();
        for (std::size_t i = 0; i < 3; ++i) after[i] -= before[i];
        return after;
    };
    // The emulator offers three candidates: each runs twice (untimed, then timed) over the first six calls.
    CHECK(calls(6) == std::array<std::uint64_t, 3>{2, 2, 2});
    // Then one of them runs every call.
    const auto kept = calls(4);
    CHECK(std::count(kept.begin(), kept.end(), 4u) == 1);
    CHECK(tune::kernels::cuda_memory_stats(*gemm.backend)->gemm_tuning_bytes == 0);
}

// kernels/backend.h OpGraph on the CUDA backend: captured from its stream, nothing runs until a replay;
// an op that waits for the device inside the capture fails it with a named error and leaves the stream usable.
TEST_CASE("emulated device: a recorded graph runs its ops only when replayed, and a capture that waits fails") {
    const auto backend = tune::kernels::make_cuda_backend(0);
    constexpr std::int64_t n = 1000;
    void* x = backend->allocate(n * 4);
    const std::vector<float> ones(n, 1.0f);
    backend->copy_to_device(x, ones.data(), n * 4);
    const std::uint64_t launches_before = tune_emu::memset_bytes();
    const auto graph = backend->record([&] {
        backend->scale(x, n, 2.0f, tune::kernels::DType::f32);
        backend->fill_zero(static_cast<char*>(x) + 4 * (n - 1), 4);  // the last element
    });
    std::vector<float> host(n);
    backend->copy_to_host(host.data(), x, n * 4);
    CHECK(host[0] == 1.0f);  // recorded, not run
    CHECK(tune_emu::memset_bytes() == launches_before);
    graph->replay();
    graph->replay();
    backend->copy_to_host(host.data(), x, n * 4);
    CHECK(host[0] == 4.0f);
    CHECK(host[n - 1] == 0.0f);
    // Waiting inside the capture (copying to pageable host memory synchronizes) breaks it.
    CHECK_THROWS_WITH(backend->record([&] { backend->copy_to_host(host.data(), x, 4); }), Catch::Contains("captur"));
    backend->scale(x, n, 0.5f, tune::kernels::DType::f32);  // the stream runs ops again
    backend->copy_to_host(host.data(), x, n * 4);
    CHECK(host[0] == 2.0f);
    backend->deallocate(x, n * 4);
}
