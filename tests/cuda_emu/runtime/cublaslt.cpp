// cuBLASLt on the emulated device: argument checks as cuBLASLt makes them,
// then a reference GEMM (fp32 products and sums, k in order) run as a
// launch over (column tile, batch) blocks so the device's workers share it.
#include <cublasLt.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "device.h"
#include "kernels/math/half.h"

struct cublasLtContext {
    int unused = 0;
};

namespace {

constexpr std::int64_t kHandleBytes = 8 << 20;        // what the handle pretends to hold on the device
constexpr std::uint64_t kAlgoWorkspace = 1ull << 20;  // candidate 0's workspace (when the cap allows)
constexpr int kCandidates = 3;
constexpr std::int64_t kColumnsPerBlock = 16;

std::string& refusal() {
    thread_local std::string why;
    return why;
}

cublasStatus_t refuse(cublasStatus_t status, const std::string& why) {
    refusal() = why;
    return status;
}

std::size_t element_bytes(cudaDataType_t t) {
    switch (t) {
        case CUDA_R_32F:
            return 4;
        case CUDA_R_16F:
        case CUDA_R_16BF:
            return 2;
        default:
            return 0;
    }
}

float load(const void* p, cudaDataType_t t, std::int64_t i) {
    switch (t) {
        case CUDA_R_16BF:
            return tune::math::to_float(static_cast<const tune::math::bf16*>(p)[i]);
        case CUDA_R_16F:
            return tune::math::to_float(static_cast<const tune::math::fp16*>(p)[i]);
        default:
            return static_cast<const float*>(p)[i];
    }
}

void store(void* p, cudaDataType_t t, std::int64_t i, float v) {
    switch (t) {
        case CUDA_R_16BF:
            static_cast<tune::math::bf16*>(p)[i] = tune::math::to_bf16(v);
            break;
        case CUDA_R_16F:
            static_cast<tune::math::fp16*>(p)[i] = tune::math::to_fp16(v);
            break;
        default:
            static_cast<float*>(p)[i] = v;
            break;
    }
}

template <class T>
cublasStatus_t read_attribute(T& out, const void* buf, std::size_t bytes, const char* what) {
    if (buf == nullptr || bytes != sizeof(T))
        return refuse(CUBLAS_STATUS_INVALID_VALUE, std::string(what) + ": attribute buffer of " +
                                                       std::to_string(bytes) + " bytes, expected " +
                                                       std::to_string(sizeof(T)));
    std::memcpy(&out, buf, sizeof(T));
    return CUBLAS_STATUS_SUCCESS;
}

// The problem cuBLASLt sees: D (m, n) = op(A) (m, k) op(B) (k, n), column-major.
struct Problem {
    std::int64_t m, n, k;
    bool ta, tb;
};

cublasStatus_t check_problem(const cublasLtMatmulDescOpaque_t* desc, const cublasLtMatrixLayoutOpaque_t* a,
                             const cublasLtMatrixLayoutOpaque_t* b, const cublasLtMatrixLayoutOpaque_t* c,
                             const cublasLtMatrixLayoutOpaque_t* d, Problem& p) {
    if (desc == nullptr || a == nullptr || b == nullptr || c == nullptr || d == nullptr)
        return refuse(CUBLAS_STATUS_INVALID_VALUE, "null descriptor");
    if ((desc->compute != CUBLAS_COMPUTE_32F && desc->compute != CUBLAS_COMPUTE_32F_FAST_TF32) ||
        desc->scale != CUDA_R_32F)
        return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "only fp32 compute with fp32 scale is emulated");
    if (a->type != b->type) return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "A and B types differ");
    if (c->type != d->type) return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "C and D types differ");
    const bool half = a->type == CUDA_R_16F || a->type == CUDA_R_16BF;
    if (!(a->type == CUDA_R_32F && c->type == CUDA_R_32F) && !(half && (c->type == a->type || c->type == CUDA_R_32F)))
        return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "unsupported type combination for COMPUTE_32F");
    for (const auto* l : {a, b, c, d}) {
        if (l->ld < 1 || static_cast<std::uint64_t>(l->ld) < l->rows)
            return refuse(CUBLAS_STATUS_INVALID_VALUE, "a leading dimension smaller than the rows (column-major)");
        if (l->batch < 1) return refuse(CUBLAS_STATUS_INVALID_VALUE, "batch count below 1");
    }
    if (a->batch != b->batch || a->batch != c->batch || c->batch != d->batch)
        return refuse(CUBLAS_STATUS_INVALID_VALUE, "batch counts differ between A, B, C and D");
    if (c->rows != d->rows || c->cols != d->cols || c->ld != d->ld || c->stride != d->stride)
        return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "D's layout differs from C's (only in-place-compatible layouts)");
    p.ta = desc->trans_a == CUBLAS_OP_T;
    p.tb = desc->trans_b == CUBLAS_OP_T;
    p.m = static_cast<std::int64_t>(p.ta ? a->cols : a->rows);
    p.k = static_cast<std::int64_t>(p.ta ? a->rows : a->cols);
    const auto kb = static_cast<std::int64_t>(p.tb ? b->cols : b->rows);
    p.n = static_cast<std::int64_t>(p.tb ? b->rows : b->cols);
    if (kb != p.k || static_cast<std::int64_t>(c->rows) != p.m || static_cast<std::int64_t>(c->cols) != p.n)
        return refuse(CUBLAS_STATUS_INVALID_VALUE, "op(A), op(B) and C have inconsistent shapes");
    return CUBLAS_STATUS_SUCCESS;
}

// Elements from a matrix's first to its last, over the batch.
std::uint64_t extent_bytes(const cublasLtMatrixLayoutOpaque_t* l) {
    if (l->rows == 0 || l->cols == 0) return 0;
    const auto last = static_cast<std::uint64_t>((l->batch - 1) * l->stride) +
                      (l->cols - 1) * static_cast<std::uint64_t>(l->ld) + l->rows;
    return last * element_bytes(l->type);
}

bool aligned_all(const void* p, const cublasLtMatrixLayoutOpaque_t* l, std::uint64_t align) {
    const std::size_t e = element_bytes(l->type);
    for (std::int32_t i = 0; i < l->batch; ++i) {
        const auto address = reinterpret_cast<std::uintptr_t>(p) + static_cast<std::uint64_t>(i * l->stride) * e;
        if (address % align != 0) return false;
        if (l->stride == 0) break;
    }
    return true;
}

struct GemmJob {
    Problem p;
    const cublasLtMatrixLayoutOpaque_t *la, *lb, *lc;
    const void *a, *b, *c;
    void* d;
    float alpha, beta;
    const std::vector<float>* a_cols;  // op(A) per batch, fp32 column-major (m, k)
    std::int64_t a_batches;            // 1 when A is broadcast
};

// Block (x, y): columns [x*16, x*16 + 16) of batch y.
void gemm_block(const GemmJob& j) {
    const uint3 blk = blockIdx;
    const std::int64_t batch = blk.y, j0 = blk.x * kColumnsPerBlock;
    const std::int64_t j1 = std::min(j0 + kColumnsPerBlock, j.p.n);
    const std::int64_t m = j.p.m, k = j.p.k;
    const std::size_t eb = element_bytes(j.lb->type), ec = element_bytes(j.lc->type);
    const auto* b = static_cast<const unsigned char*>(j.b) + static_cast<std::uint64_t>(batch * j.lb->stride) * eb;
    const auto* c = static_cast<const unsigned char*>(j.c) + static_cast<std::uint64_t>(batch * j.lc->stride) * ec;
    auto* d = static_cast<unsigned char*>(j.d) + static_cast<std::uint64_t>(batch * j.lc->stride) * ec;
    const float* a = j.a_cols->data() + (j.a_batches == 1 ? 0 : batch) * m * k;
    std::vector<float> acc(static_cast<std::size_t>(m));
    for (std::int64_t col = j0; col < j1; ++col) {
        std::fill(acc.begin(), acc.end(), 0.0f);
        for (std::int64_t p = 0; p < k; ++p) {
            const float bv = j.p.tb ? load(b, j.lb->type, col + p * j.lb->ld) : load(b, j.lb->type, p + col * j.lb->ld);
            const float* ap = a + p * m;
            for (std::int64_t i = 0; i < m; ++i) acc[static_cast<std::size_t>(i)] += ap[i] * bv;
        }
        for (std::int64_t i = 0; i < m; ++i) {
            const std::int64_t at = i + col * j.lc->ld;
            // beta = 0: C is not read (cuBLAS semantics: NaN or garbage in C is ignored).
            const float prior = j.beta != 0.0f ? j.beta * load(c, j.lc->type, at) : 0.0f;
            store(d, j.lc->type, at, j.alpha * acc[static_cast<std::size_t>(i)] + prior);
        }
    }
}

// The product itself, from the operands as they are when it runs: at once, or when a graph it was
// captured into is launched (layouts held by value, as the matmul's own copy of its arguments).
struct Matmul {
    Problem p;
    cublasLtMatrixLayoutOpaque_t la, lb, lc;
    const void *a, *b, *c;
    void* d;
    float alpha, beta;

    void run() const {
        // op(A) of every batch as fp32 column-major (m, k), converted once.
        const std::int64_t a_batches = la.stride == 0 ? 1 : la.batch;
        std::vector<float> a_cols(static_cast<std::size_t>(a_batches * p.m * p.k));
        const std::size_t ea = element_bytes(la.type);
        for (std::int64_t bi = 0; bi < a_batches; ++bi) {
            const auto* base = static_cast<const unsigned char*>(a) + static_cast<std::uint64_t>(bi * la.stride) * ea;
            float* out = a_cols.data() + bi * p.m * p.k;
            for (std::int64_t q = 0; q < p.k; ++q)
                for (std::int64_t i = 0; i < p.m; ++i)
                    out[i + q * p.m] = p.ta ? load(base, la.type, q + i * la.ld) : load(base, la.type, i + q * la.ld);
        }
        const GemmJob job{p, &la, &lb, &lc, a, b, c, d, alpha, beta, &a_cols, a_batches};
        const auto tiles = static_cast<unsigned>((p.n + kColumnsPerBlock - 1) / kColumnsPerBlock);
        tune_emu::make_launcher("cublasLtMatmul (emulated)", dim3(tiles, static_cast<unsigned>(lc.batch)), dim3(1), 0,
                                nullptr, [](const GemmJob* j) { gemm_block(*j); })(&job);
    }
};

}  // namespace

const char* cublasGetStatusName(cublasStatus_t s) {
    switch (s) {
        case CUBLAS_STATUS_SUCCESS:
            return "CUBLAS_STATUS_SUCCESS";
        case CUBLAS_STATUS_NOT_INITIALIZED:
            return "CUBLAS_STATUS_NOT_INITIALIZED";
        case CUBLAS_STATUS_ALLOC_FAILED:
            return "CUBLAS_STATUS_ALLOC_FAILED";
        case CUBLAS_STATUS_INVALID_VALUE:
            return "CUBLAS_STATUS_INVALID_VALUE";
        case CUBLAS_STATUS_NOT_SUPPORTED:
            return "CUBLAS_STATUS_NOT_SUPPORTED";
        case CUBLAS_STATUS_EXECUTION_FAILED:
            return "CUBLAS_STATUS_EXECUTION_FAILED";
        default:
            return "CUBLAS_STATUS_INTERNAL_ERROR";
    }
}

const char* cublasGetStatusString(cublasStatus_t s) {
    thread_local std::string text;
    text = std::string(cublasGetStatusName(s)) + " [emulated cuBLASLt: " + refusal() + "]";
    return text.c_str();
}

const char* tune_emu::cublaslt_last_refusal() { return refusal().c_str(); }

cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle) {
    *handle = new cublasLtContext;
    tune_emu::device().reserve_hidden(kHandleBytes);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) {
    if (handle == nullptr) return refuse(CUBLAS_STATUS_NOT_INITIALIZED, "null handle");
    delete handle;
    tune_emu::device().reserve_hidden(-kHandleBytes);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc, cublasComputeType_t compute, cudaDataType_t scale) {
    *desc = new cublasLtMatmulDescOpaque_t{compute, scale};
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
    delete desc;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
                                              const void* buf, std::size_t bytes) {
    std::int32_t op = 0;
    switch (attr) {
        case CUBLASLT_MATMUL_DESC_TRANSA:
        case CUBLASLT_MATMUL_DESC_TRANSB: {
            if (auto s = read_attribute(op, buf, bytes, "TRANSA/TRANSB"); s != CUBLAS_STATUS_SUCCESS) return s;
            if (op != CUBLAS_OP_N && op != CUBLAS_OP_T) return refuse(CUBLAS_STATUS_INVALID_VALUE, "bad operation");
            (attr == CUBLASLT_MATMUL_DESC_TRANSA ? desc->trans_a : desc->trans_b) = static_cast<cublasOperation_t>(op);
            return CUBLAS_STATUS_SUCCESS;
        }
        default:
            return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "matmul descriptor attribute not emulated");
    }
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType type, std::uint64_t rows,
                                          std::uint64_t cols, std::int64_t ld) {
    if (element_bytes(type) == 0) return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "data type not emulated");
    *layout = new cublasLtMatrixLayoutOpaque_t{type, rows, cols, ld};
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
    delete layout;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t layout, cublasLtMatrixLayoutAttribute_t attr,
                                                const void* buf, std::size_t bytes) {
    switch (attr) {
        case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT:
            return read_attribute(layout->batch, buf, bytes, "BATCH_COUNT");
        case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET:
            return read_attribute(layout->stride, buf, bytes, "STRIDED_BATCH_OFFSET");
        default:
            return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "layout attribute not emulated");
    }
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
    *pref = new cublasLtMatmulPreferenceOpaque_t;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
    delete pref;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr, const void* buf,
                                                    std::size_t bytes) {
    switch (attr) {
        case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES:
            return read_attribute(pref->max_workspace, buf, bytes, "MAX_WORKSPACE_BYTES");
        case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES:
        case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES:
        case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES:
        case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES:
            return read_attribute(pref->align[attr - CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES], buf, bytes,
                                  "MIN_ALIGNMENT");
        default:
            return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "preference attribute not emulated");
    }
}

// Up to three candidates, all computing the same thing; each may assume the
// pointer alignments the preference promised, and the first uses 1 MiB of
// workspace when the cap allows (so a missing workspace is caught).
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                                              cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                              cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                                              cublasLtMatmulPreference_t pref, int requested,
                                              cublasLtMatmulHeuristicResult_t* results, int* returned) {
    if (handle == nullptr || pref == nullptr || results == nullptr || returned == nullptr || requested < 1)
        return refuse(CUBLAS_STATUS_INVALID_VALUE, "bad heuristic arguments");
    Problem p{};
    if (auto s = check_problem(desc, a, b, c, d, p); s != CUBLAS_STATUS_SUCCESS) return s;
    for (std::uint32_t align : pref->align)
        if (align == 0 || (align & (align - 1)) != 0)
            return refuse(CUBLAS_STATUS_INVALID_VALUE, "alignment preference not a power of two");
    const int count = std::min(requested, kCandidates);
    for (int i = 0; i < count; ++i) {
        cublasLtMatmulHeuristicResult_t& r = results[i];
        r = cublasLtMatmulHeuristicResult_t{};
        r.algo.data[0] = static_cast<std::uint64_t>(i);
        for (int o = 0; o < 4; ++o) r.algo.data[1 + o] = pref->align[o];
        r.workspaceSize = i == 0 ? std::min<std::uint64_t>(pref->max_workspace, kAlgoWorkspace) : 0;
        r.algo.data[5] = r.workspaceSize;
        r.state = CUBLAS_STATUS_SUCCESS;
        r.wavesCount = 1.0f;
    }
    *returned = count;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha, const void* a,
                              cublasLtMatrixLayout_t a_desc, const void* b, cublasLtMatrixLayout_t b_desc,
                              const void* beta, const void* c, cublasLtMatrixLayout_t c_desc, void* d,
                              cublasLtMatrixLayout_t d_desc, const cublasLtMatmulAlgo_t* algo, void* workspace,
                              std::size_t workspace_bytes, cudaStream_t stream) {
    if (handle == nullptr) return refuse(CUBLAS_STATUS_NOT_INITIALIZED, "null handle");
    if (alpha == nullptr || beta == nullptr || algo == nullptr)
        return refuse(CUBLAS_STATUS_INVALID_VALUE, "null alpha, beta or algo (the emulator requires an algo)");
    Problem p{};
    if (auto s = check_problem(desc, a_desc, b_desc, c_desc, d_desc, p); s != CUBLAS_STATUS_SUCCESS) return s;
    const std::uint64_t ws_needed = algo->data[5];
    if (workspace_bytes < ws_needed)
        return refuse(CUBLAS_STATUS_INVALID_VALUE, "workspace of " + std::to_string(workspace_bytes) +
                                                       " bytes, the algorithm needs " + std::to_string(ws_needed));
    if (ws_needed > 0 && !tune_emu::device().is_device(workspace, ws_needed))
        return refuse(CUBLAS_STATUS_INVALID_VALUE, "workspace is not device memory");
    const void* ptrs[4] = {a, b, c, d};
    const cublasLtMatrixLayoutOpaque_t* layouts[4] = {a_desc, b_desc, c_desc, d_desc};
    const char* names[4] = {"A", "B", "C", "D"};
    const float alpha_v = *static_cast<const float*>(alpha), beta_v = *static_cast<const float*>(beta);
    for (int o = 0; o < 4; ++o) {
        const std::uint64_t bytes = extent_bytes(layouts[o]);
        if (o == 2 && beta_v == 0.0f) continue;  // C is not read
        if (bytes > 0 && !tune_emu::device().is_device(ptrs[o], bytes))
            return refuse(CUBLAS_STATUS_INVALID_VALUE,
                          std::string(names[o]) + " is not inside one device allocation over its extent");
        if (!aligned_all(ptrs[o], layouts[o], element_bytes(layouts[o]->type)))
            return refuse(CUBLAS_STATUS_INVALID_VALUE, std::string(names[o]) + " is not aligned to its element");
        if (!aligned_all(ptrs[o], layouts[o], algo->data[1 + o]))
            return refuse(CUBLAS_STATUS_NOT_SUPPORTED,
                          std::string(names[o]) + " (or one of its batch matrices) is less aligned than the " +
                              std::to_string(algo->data[1 + o]) + " bytes the heuristic was told");
    }
    // cuBLASLt computes in place (C = D) or out of place; C partly under D would be read after written.
    const std::uint64_t d_bytes = extent_bytes(d_desc);
    const auto c_at = reinterpret_cast<std::uintptr_t>(c), d_at = reinterpret_cast<std::uintptr_t>(d);
    if (beta_v != 0.0f && c != d && c_at < d_at + d_bytes && d_at < c_at + d_bytes)
        return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "C overlaps D without being D");
    // The algorithm owns its workspace while it runs: scribble over it, so
    // data that shares it with the GEMM shows up as corrupted.
    if (ws_needed > 0) std::memset(workspace, 0xa5, ws_needed);
    ++tune_emu::device().matmuls;
    ++tune_emu::device().matmuls_by_candidate[algo->data[0] % 4];
    if (p.m == 0 || p.n == 0) return CUBLAS_STATUS_SUCCESS;

    const Matmul matmul{p, *a_desc, *b_desc, *c_desc, a, b, c, d, alpha_v, beta_v};
    if (tune_emu::holds(stream)) {
        tune_emu::record(stream, [matmul] { matmul.run(); });
        return CUBLAS_STATUS_SUCCESS;
    }
    matmul.run();
    if (tune_emu::device().take_last_error() != cudaSuccess)
        return refuse(CUBLAS_STATUS_EXECUTION_FAILED, tune_emu::device().detail());
    return CUBLAS_STATUS_SUCCESS;
}
