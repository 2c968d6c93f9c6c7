// cuBLASLt GEMM plans: building, choosing an algorithm, running.
#include "kernels/cuda/gemm_lt.cuh"

#include <algorithm>
#include <limits>
#include <vector>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/op_checks.h"

namespace tune::kernels::cuda {

namespace {

template <class Handle, cublasStatus_t (*Destroy)(Handle)>
struct Destroyer {
    void operator()(Handle h) const { Destroy(h); }
};

using MatmulDesc =
    std::unique_ptr<cublasLtMatmulDescOpaque_t, Destroyer<cublasLtMatmulDesc_t, cublasLtMatmulDescDestroy>>;
using Layout =
    std::unique_ptr<cublasLtMatrixLayoutOpaque_t, Destroyer<cublasLtMatrixLayout_t, cublasLtMatrixLayoutDestroy>>;
using Preference = std::unique_ptr<cublasLtMatmulPreferenceOpaque_t,
                                   Destroyer<cublasLtMatmulPreference_t, cublasLtMatmulPreferenceDestroy>>;

cudaDataType_t cuda_type(DType t) {
    switch (t) {
        case DType::f32:
            return CUDA_R_32F;
        case DType::bf16:
            return CUDA_R_16BF;
        case DType::f16:
            return CUDA_R_16F;
        default:
            break;
    }
    throw BackendError("cuda backend: gemm: dtype " + std::string(dtype_name(t)) + " is not a GEMM type");
}

// A column-major (rows, cols) layout with leading dimension ld, strided over the batch.
Layout make_layout(DType t, std::int64_t rows, std::int64_t cols, std::int64_t ld, std::int64_t batch,
                   std::int64_t stride) {
    cublasLtMatrixLayout_t raw = nullptr;
    TUNE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&raw, cuda_type(t), static_cast<std::uint64_t>(rows),
                                                 static_cast<std::uint64_t>(cols), ld));
    Layout layout(raw);
    if (batch > 1) {
        const auto count = static_cast<std::int32_t>(batch);
        TUNE_CUBLAS_CHECK(
            cublasLtMatrixLayoutSetAttribute(raw, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count));
        TUNE_CUBLAS_CHECK(
            cublasLtMatrixLayoutSetAttribute(raw, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride));
    }
    return layout;
}

// C is never read where beta = 0, nor modified where it is read from elsewhere (a c_in, which
// check_gemm_args holds apart from C), so candidates may be timed writing C itself, at any size and
// with no scratch, unless C overlaps A or B.
bool timed_in_place(const GemmArgs& g) {
    if (g.beta != 0.0f && c_source(g) == g.c) return false;
    const std::uint64_t c = gemm_c_bytes(g);
    return disjoint(g.c, c, g.a, gemm_a_bytes(g)) && disjoint(g.c, c, g.b, gemm_b_bytes(g));
}

}  // namespace

struct GemmLt::Plan {
    MatmulDesc desc;
    Layout a, b, c;  // cuBLAS's operands: a = our B, b = our A (column-major view)
    cublasLtMatmulAlgo_t algo{};
    std::uint64_t workspace = 0;
    // An accumulating GEMM whose C is too large for a scratch copy tries the
    // candidates on its own calls instead (any algorithm adds the same product):
    // each candidate runs once untimed, so its kernels are loaded, then once
    // timed; the fastest is kept once none is left to try.
    struct Candidate {
        cublasLtMatmulAlgo_t algo;
        std::uint64_t workspace;
        bool warm = false;
    };
    std::vector<Candidate> untried;
    float best_ms = std::numeric_limits<float>::infinity();
};

// D = alpha op(A) op(B) + beta C with `algo`, C read from c_source(g); `workspace` bytes of ws at most.
cublasStatus_t GemmLt::launch(const Plan& plan, const cublasLtMatmulAlgo_t& algo, const GemmArgs& g, void* d,
                              Workspace ws, std::uint64_t workspace) {
    return cublasLtMatmul(handle_, plan.desc.get(), &g.alpha, g.b, plan.a.get(), g.a, plan.b.get(), &g.beta,
                          c_source(g), plan.c.get(), d, plan.c.get(), &algo, ws.ptr, workspace, stream_);
}

GemmLt::GemmLt(cudaStream_t stream, MemoryPool& pool, GemmOptions options)
    : stream_(stream),
      pool_(pool),
      options_(options),
      cache_(std::make_unique<AlgoCache<Plan>>(options.cache_entries)) {
    TUNE_CUBLAS_CHECK(cublasLtCreate(&handle_));
}

GemmLt::~GemmLt() {
    cache_.reset();  // plans hold descriptors of this handle
    cublasLtDestroy(handle_);
}

const AlgoCacheStats& GemmLt::cache_stats() const { return cache_->stats(); }

GemmLt::Plan GemmLt::make_plan(const GemmKey& key, const GemmArgs& g, Workspace ws) {
    Plan plan;
    cublasLtMatmulDesc_t desc = nullptr;
    // CUBLAS_COMPUTE_32F, never _FAST_TF32: fp32 trials are the precision the
    // others are judged against (and match the CPU backend's fp32 sums); TF32
    // keeps 10 mantissa bits and would make "fp32" a fourth mixed precision.
    // 16-bit operands use tensor cores either way.
    TUNE_CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    plan.desc.reset(desc);
    // Column-major C^T (n, m) = op(B)^T (n, k) @ op(A)^T (k, m).
    const cublasOperation_t op_a = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t op_b = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    TUNE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof op_a));
    TUNE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof op_b));
    // Our B stored row-major (k, n) is column-major (n, k); transposed it is (k, n).
    plan.a = g.trans_b ? make_layout(g.b_dtype, g.k, g.n, g.ldb, g.batch, g.stride_b)
                       : make_layout(g.b_dtype, g.n, g.k, g.ldb, g.batch, g.stride_b);
    plan.b = g.trans_a ? make_layout(g.a_dtype, g.m, g.k, g.lda, g.batch, g.stride_a)
                       : make_layout(g.a_dtype, g.k, g.m, g.lda, g.batch, g.stride_a);
    plan.c = make_layout(g.c_dtype, g.n, g.m, g.ldc, g.batch, g.stride_c);

    cublasLtMatmulPreference_t raw_pref = nullptr;
    TUNE_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&raw_pref));
    Preference pref(raw_pref);
    const std::uint64_t cap = key.workspace_cap;
    TUNE_CUBLAS_CHECK(
        cublasLtMatmulPreferenceSetAttribute(raw_pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &cap, sizeof cap));
    // Algorithms may assume pointer alignment; tell the heuristic what these pointers have.
    const std::uint32_t align_a = key.align_b, align_b = key.align_a, align_c = key.align_c;
    TUNE_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(raw_pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                                           &align_a, sizeof align_a));
    TUNE_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(raw_pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                                           &align_b, sizeof align_b));
    TUNE_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(raw_pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                                                           &align_c, sizeof align_c));
    TUNE_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(raw_pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                                                           &align_c, sizeof align_c));

    std::vector<cublasLtMatmulHeuristicResult_t> found(static_cast<std::size_t>(std::max(1, options_.candidates)));
    int count = 0;
    TUNE_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(handle_, desc, plan.a.get(), plan.b.get(), plan.c.get(),
                                                     plan.c.get(), raw_pref, static_cast<int>(found.size()),
                                                     found.data(), &count));
    if (count == 0) throw BackendError("cuda backend: gemm: cuBLASLt has no algorithm for " + to_string(key));
    choose_algorithm(plan, g, ws, found.data(), count);
    return plan;
}

// The heuristic's first candidate, or the fastest of them when timing is on
// and they can write C itself (timed_in_place) or a scratch output (so a C that
// is read is not modified while timing) can be had.
void GemmLt::choose_algorithm(Plan& plan, const GemmArgs& g, Workspace ws, const cublasLtMatmulHeuristicResult_t* found,
                              int count) {
    plan.algo = found[0].algo;
    plan.workspace = found[0].workspaceSize;
    if (!options_.time_candidates || count < 2) return;
    if (timed_in_place(g)) {
        pick_fastest(plan, g, ws, found, count, g.c);
        return;
    }
    const std::uint64_t scratch_bytes = gemm_c_bytes(g);
    // No scratch above the limit (a bounded spike) or when memory is too tight: the calls try the candidates.
    const auto try_on_calls = [&] {
        for (int i = 0; i < count; ++i)
            if (found[i].state == CUBLAS_STATUS_SUCCESS)
                plan.untried.push_back({found[i].algo, found[i].workspaceSize});
    };
    if (scratch_bytes > options_.tuning_scratch_limit) return try_on_calls();
    void* scratch = nullptr;
    try {
        scratch = pool_.allocate(scratch_bytes);
    } catch (const OutOfMemoryError&) {
        return try_on_calls();
    }
    tuning_bytes_ = std::max(tuning_bytes_, scratch_bytes);
    pick_fastest(plan, g, ws, found, count, scratch);
    pool_.deallocate(scratch, scratch_bytes);
}

void GemmLt::pick_fastest(Plan& plan, const GemmArgs& g, Workspace ws, const cublasLtMatmulHeuristicResult_t* found,
                          int count, void* d) {
    float best = std::numeric_limits<float>::infinity();
    for (int i = 0; i < count; ++i) {
        if (found[i].state != CUBLAS_STATUS_SUCCESS) continue;
        const float ms = time_algorithm(plan, found[i].algo, g, d, ws);
        if (ms < best) {
            best = ms;
            plan.algo = found[i].algo;
            plan.workspace = found[i].workspaceSize;
        }
    }
}

// One warm-up and one timed run of algo writing D = scratch; infinity when
// cuBLASLt refuses to run it.
float GemmLt::time_algorithm(const Plan& plan, const cublasLtMatmulAlgo_t& algo, const GemmArgs& g, void* d,
                             Workspace ws) {
    cudaEvent_t start = nullptr, stop = nullptr;
    TUNE_CUDA_CHECK(cudaEventCreate(&start));
    TUNE_CUDA_CHECK(cudaEventCreate(&stop));
    float ms = std::numeric_limits<float>::infinity();
    if (launch(plan, algo, g, d, ws, ws.bytes) == CUBLAS_STATUS_SUCCESS) {
        TUNE_CUDA_CHECK(cudaEventRecord(start, stream_));
        const cublasStatus_t status = launch(plan, algo, g, d, ws, ws.bytes);
        TUNE_CUDA_CHECK(cudaEventRecord(stop, stream_));
        TUNE_CUDA_CHECK(cudaEventSynchronize(stop));
        if (status == CUBLAS_STATUS_SUCCESS) TUNE_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    }
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    return ms;
}

// This call with the next untried candidate: untimed once, then timed; a
// candidate cuBLASLt refuses is dropped and the call runs the plan's algorithm.
void GemmLt::run_trying(Plan& plan, const GemmArgs& g, Workspace ws) {
    Plan::Candidate& c = plan.untried.front();
    cudaEvent_t start = nullptr, stop = nullptr;
    if (c.warm) {
        TUNE_CUDA_CHECK(cudaEventCreate(&start));
        TUNE_CUDA_CHECK(cudaEventCreate(&stop));
        TUNE_CUDA_CHECK(cudaEventRecord(start, stream_));
    }
    const cublasStatus_t status = launch(plan, c.algo, g, g.c, ws, c.workspace);
    float ms = std::numeric_limits<float>::infinity();
    if (c.warm) {
        TUNE_CUDA_CHECK(cudaEventRecord(stop, stream_));
        TUNE_CUDA_CHECK(cudaEventSynchronize(stop));
        if (status == CUBLAS_STATUS_SUCCESS) TUNE_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
        cudaEventDestroy(start);
        cudaEventDestroy(stop);
    }
    const Plan::Candidate tried = c;
    if (status != CUBLAS_STATUS_SUCCESS || tried.warm)
        plan.untried.erase(plan.untried.begin());
    else
        c.warm = true;
    if (ms < plan.best_ms) {
        plan.best_ms = ms;
        plan.algo = tried.algo;
        plan.workspace = tried.workspace;
    }
    if (status != CUBLAS_STATUS_SUCCESS) TUNE_CUBLAS_CHECK(launch(plan, plan.algo, g, g.c, ws, plan.workspace));
}

void GemmLt::run(const GemmArgs& g, Workspace ws) {
    check_gemm_args(g);
    if (g.m == 0 || g.n == 0) return;
    require(g.k > 0, "gemm", "k = 0 is not supported (C would only be scaled by beta)");
    require(ws.ptr != nullptr && ws.bytes >= kWorkspaceBytes, "gemm", "workspace smaller than gemm_workspace_bytes()");
    const GemmKey key = make_gemm_key(g, kWorkspaceBytes);
    Plan* plan = cache_->find(key);
    if (plan == nullptr) plan = &cache_->insert(key, make_plan(key, g, ws));
    if (!plan->untried.empty()) return run_trying(*plan, g, ws);
    TUNE_CUBLAS_CHECK(launch(*plan, plan->algo, g, g.c, ws, plan->workspace));
}

}  // namespace tune::kernels::cuda
