// Adafactor (transformers.optimization.Adafactor, beta1 = None), every step
// on the device with no host round trip: RMS(p) -> lr, second-moment
// statistics (rows by block, columns by tile, or whole for vectors), the
// mean of the row statistics, RMS of the update -> clip divisor, then the
// update. Scalars pass between kernels through the backend's scratch.
//
// adafactor_update is that, fused, for a whole tensor on one rank. The three
// piece ops (kernels/backend.h) are the same steps over the elements
// [begin, begin + n) one ZeRO rank owns, with the caller's all-reduce between
// them: they add their partial sums into the caller's fp32 device buffers and
// read the completed ones back from there (kernels/cpu/cpu_adafactor.cpp is
// the reference).
#include "kernels/cuda/cuda_backend.cuh"
#include "kernels/cuda/optimizer_loop.cuh"
#include "kernels/cuda/reduce.cuh"
#include "kernels/cuda/reductions.cuh"
#include "kernels/math/adafactor.h"

namespace tune::kernels::cuda {

namespace {

math::AdafactorHyper hyper(const AdafactorParams& hp) {
    math::AdafactorHyper h;
    h.eps1 = hp.eps1, h.eps2 = hp.eps2, h.clip_threshold = hp.clip_threshold, h.decay_rate = hp.decay_rate;
    h.weight_decay = hp.weight_decay, h.scale_parameter = hp.scale_parameter, h.relative_step = hp.relative_step;
    h.warmup_init = false, h.lr = hp.lr;
    return h;
}

// Device scalars computed by one kernel and read by the next.
struct Scalars {
    float lr, row_mean, divisor;
};

// Where element i's statistics are. Matrices: i is the element begin + i of
// the (rows, cols) tensor and row_mean a device scalar; vectors: row holds
// the element's own statistic at i.
struct Factors {
    const void* row;
    const void* col;
    DType state;
    std::int64_t cols;
    bool factored;
    std::int64_t begin;
    const float* row_mean;
};

__device__ float adafactor_grad(const ParamTensor& t, std::int64_t i) {
    return load_any(t.grad, t.grad_dtype, i) * grad_scale_of(t);
}

// The update of element i before clipping, from the new statistics.
__device__ float update_value(const Factors& f, float g, std::int64_t i) {
    if (!f.factored) return math::adafactor_unfactored_update(g, load_any(f.row, f.state, i));
    const std::int64_t e = f.begin + i;
    return math::adafactor_factored_update(g, load_any(f.row, f.state, e / f.cols), *f.row_mean,
                                           load_any(f.col, f.state, e % f.cols));
}

struct ParamSquare {
    ParamTensor t;
    __device__ float operator()(std::int64_t i) const {
        const float p = load_any(t.param, t.param_dtype, i);
        return p * p;
    }
};

struct SetLr {
    Scalars* s;
    float n;
    int step;
    math::AdafactorHyper h;
    __device__ void operator()(float total) const {
        s->lr = math::adafactor_lr(math::rms_from_sum_sq(total, n), step, h);
    }
};

struct StatValue {
    const void* stat;
    DType state;
    __device__ float operator()(std::int64_t i) const { return load_any(stat, state, i); }
};

struct SetRowMean {
    Scalars* s;
    float rows;
    __device__ void operator()(float total) const { s->row_mean = total / rows; }
};

struct UpdateSquare {
    ParamTensor t;
    Factors f;
    __device__ float operator()(std::int64_t i) const {
        const float u = update_value(f, adafactor_grad(t, i), i);
        return u * u;
    }
};

struct SetDivisor {
    Scalars* s;
    float n;
    math::AdafactorHyper h;
    __device__ void operator()(float total) const { s->divisor = math::adafactor_clip_divisor(total, n, h); }
};

struct ApplyRule {
    Factors f;
    const Scalars* s;
    math::AdafactorHyper h;
    template <int W>
    __device__ void operator()(float (&p)[W], const float (&g)[W], std::int64_t i, const bool (&decay)[W]) const {
        for (int j = 0; j < W; ++j)
            p[j] = math::adafactor_apply(p[j], update_value(f, g[j], i + j), s->lr, s->divisor, h, decay[j]);
    }
    __device__ ApplyRule at_launch() const { return *this; }
    bool packs_at(std::int64_t) const { return true; }  // its statistics are read one element at a time
};

// Row r's statistic from the mean over its columns; one block per row.
__global__ void row_stats_kernel(ParamTensor t, void* row, DType state, std::int64_t cols, float beta2t,
                                 math::AdafactorHyper h) {
    __shared__ float shared[32];
    const std::int64_t r = blockIdx.x;
    float acc = 0.0f;
    for (std::int64_t j = threadIdx.x; j < cols; j += blockDim.x)
        acc += math::adafactor_sq(adafactor_grad(t, r * cols + j), h);
    acc = block_sum(acc, shared);
    if (threadIdx.x == 0)
        store_any(row, state, r, math::adafactor_ema(load_any(row, state, r), acc / static_cast<float>(cols), beta2t));
}

constexpr int kTileColumns = 32;
constexpr int kTileRows = 8;

// Column statistics: block (32, 8) owns 32 columns and sums them over all rows in a fixed order.
__global__ void col_stats_kernel(ParamTensor t, void* col, DType state, std::int64_t rows, std::int64_t cols,
                                 float beta2t, math::AdafactorHyper h) {
    __shared__ float partial[kTileRows][kTileColumns];
    const std::int64_t j = static_cast<std::int64_t>(blockIdx.x) * kTileColumns + threadIdx.x;
    float acc = 0.0f;
    if (j < cols)
        for (std::int64_t r = threadIdx.y; r < rows; r += kTileRows)
            acc += math::adafactor_sq(adafactor_grad(t, r * cols + j), h);
    partial[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y != 0 || j >= cols) return;
    float total = 0.0f;
    for (int i = 0; i < kTileRows; ++i) total += partial[i][threadIdx.x];
    store_any(col, state, j, math::adafactor_ema(load_any(col, state, j), total / static_cast<float>(rows), beta2t));
}

// Vectors: each element keeps its own running mean.
__global__ void vector_stats_kernel(ParamTensor t, void* stat, DType state, float beta2t, math::AdafactorHyper h) {
    TUNE_GRID_STRIDE(i, t.n) {
        const float sq = math::adafactor_sq(adafactor_grad(t, i), h);
        store_any(stat, state, i, math::adafactor_ema(load_any(stat, state, i), sq, beta2t));
    }
}

// ---- the piece ops

void check_piece(const AdafactorPiece& piece, const char* op) {
    check_param(piece.p, op);
    check_single_tensor(piece.p, "cuda", op);
    require(piece.rows > 0 && piece.cols > 0 && piece.begin >= 0 && piece.begin + piece.p.n <= piece.rows * piece.cols,
            op, "the piece must lie inside the (rows, cols) tensor");
    require(piece.rows <= 0x7fffffff, op, "too many rows for a grid");
    require(is_float(piece.state), op, "state must be float storage");
    require(!piece.factored() || (piece.row_stat != nullptr && piece.col_stat != nullptr), op,
            "a matrix needs row and column statistics");
}

Factors piece_factors(const AdafactorPiece& piece, const float* row_mean) {
    return {piece.row_stat, piece.col_stat, piece.state, piece.cols, piece.factored(), piece.begin, row_mean};
}

struct AddTo {
    float* out;
    __device__ void operator()(float total) const { *out += total; }
};

struct StoreMean {
    float* out;
    float count;
    __device__ void operator()(float total) const { *out = total / count; }
};

// Row r of the piece's rows [r0, r0 + gridDim.x): one block per row adds the
// g^2 + eps1 of the piece's columns of it (tensor elements [lo, hi)) to row_sums[r].
__global__ void piece_row_sums_kernel(ParamTensor t, std::int64_t begin, std::int64_t cols, std::int64_t r0,
                                      float* row_sums, math::AdafactorHyper h) {
    __shared__ float shared[32];
    const std::int64_t r = r0 + blockIdx.x;
    const std::int64_t lo = begin > r * cols ? begin : r * cols;
    const std::int64_t hi = begin + t.n < (r + 1) * cols ? begin + t.n : (r + 1) * cols;
    float acc = 0.0f;
    for (std::int64_t e = lo + threadIdx.x; e < hi; e += blockDim.x)
        acc += math::adafactor_sq(adafactor_grad(t, e - begin), h);
    acc = block_sum(acc, shared);
    if (threadIdx.x == 0) row_sums[r] += acc;
}

// Columns [c0, c1) over the piece's rows [r0, r1): block (32, 8) owns 32
// columns, threadIdx.y strides the rows in a fixed order, elements outside
// the piece add nothing; col_sums[j] += the column's sum.
__global__ void piece_col_sums_kernel(ParamTensor t, std::int64_t begin, std::int64_t cols, std::int64_t r0,
                                      std::int64_t r1, std::int64_t c0, std::int64_t c1, float* col_sums,
                                      math::AdafactorHyper h) {
    __shared__ float partial[kTileRows][kTileColumns];
    const std::int64_t j = c0 + static_cast<std::int64_t>(blockIdx.x) * kTileColumns + threadIdx.x;
    float acc = 0.0f;
    if (j < c1)
        for (std::int64_t r = r0 + threadIdx.y; r < r1; r += kTileRows) {
            const std::int64_t e = r * cols + j;
            if (e >= begin && e < begin + t.n) acc += math::adafactor_sq(adafactor_grad(t, e - begin), h);
        }
    partial[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y != 0 || j >= c1) return;
    float total = 0.0f;
    for (int i = 0; i < kTileRows; ++i) total += partial[i][threadIdx.x];
    col_sums[j] += total;
}

// The whole (replicated) statistics from the completed sums: index i < rows
// is row i (mean over cols), the rest are the columns (mean over rows).
__global__ void factored_ema_kernel(void* row, void* col, DType state, const float* row_sums, const float* col_sums,
                                    std::int64_t rows, std::int64_t cols, float beta2t) {
    TUNE_GRID_STRIDE(i, rows + cols) {
        if (i < rows) {
            store_any(row, state, i,
                      math::adafactor_ema(load_any(row, state, i), row_sums[i] / static_cast<float>(cols), beta2t));
        } else {
            const std::int64_t j = i - rows;
            store_any(col, state, j,
                      math::adafactor_ema(load_any(col, state, j), col_sums[j] / static_cast<float>(rows), beta2t));
        }
    }
}

// lr from the completed sum of p^2 and the clip divisor from that of the
// update^2, both over the whole tensor's `count` elements; one thread.
__global__ void piece_scalars_kernel(Scalars* s, const float* param_sq, const float* update_sq, float count, int step,
                                     math::AdafactorHyper h) {
    s->lr = math::adafactor_lr(math::rms_from_sum_sq(*param_sq, count), step, h);
    s->divisor = math::adafactor_clip_divisor(*update_sq, count, h);
}

}  // namespace

void CudaBackend::adafactor_update(const ParamTensor& t, std::int64_t rows, std::int64_t cols, void* row_stat,
                                   void* col_stat, DType sd, const AdafactorParams& hp) {
    const char* op = "adafactor_update";
    check_param(t, op);
    check_single_tensor(t, "cuda", op);
    require(rows > 0 && cols > 0 && rows * cols == t.n && rows <= 0x7fffffff, op, "rows * cols must equal n");
    require(is_float(sd), op, "state must be float storage");
    const bool factored = rows > 1 && cols > 1;
    const math::AdafactorHyper h = hyper(hp);
    const int step = static_cast<int>(hp.step);
    const float beta2t = math::adafactor_beta2t(step, h);
    const auto n = static_cast<float>(t.n);
    float* partials = scratch_.partials;
    auto* scalars = reinterpret_cast<Scalars*>(scratch_.partials + 2 * BackendScratch::kPartials);
    const Factors f{row_stat, col_stat, sd, cols, factored, 0, &scalars->row_mean};

    // RMS(p) before the update -> this tensor's learning rate.
    reduce_sum(stream_, partials, t.n, ParamSquare{t}, SetLr{scalars, n, step, h});
    TUNE_CUDA_CHECK_LAUNCH("adafactor lr");
    if (factored) {
        TUNE_LAUNCH(row_stats_kernel, static_cast<unsigned>(rows), kThreads, 0, stream_)
        (t, row_stat, sd, cols, beta2t, h);
        const auto tiles = static_cast<unsigned>((cols + kTileColumns - 1) / kTileColumns);
        TUNE_LAUNCH(col_stats_kernel, tiles, dim3(kTileColumns, kTileRows), 0, stream_)
        (t, col_stat, sd, rows, cols, beta2t, h);
        reduce_sum(stream_, partials, rows, StatValue{row_stat, sd}, SetRowMean{scalars, static_cast<float>(rows)});
    } else {
        TUNE_LAUNCH(vector_stats_kernel, grid_for(t.n), kThreads, 0, stream_)(t, row_stat, sd, beta2t, h);
    }
    TUNE_CUDA_CHECK_LAUNCH("adafactor statistics");
    // RMS of the update -> clip divisor.
    reduce_sum(stream_, partials, t.n, UpdateSquare{t, f}, SetDivisor{scalars, n, h});
    TUNE_CUDA_CHECK_LAUNCH("adafactor clip");
    update_params(stream_, t, ApplyRule{f, scalars, h});
}

void CudaBackend::adafactor_partial_sums(const AdafactorPiece& piece, float* param_sq, float* row_sums, float* col_sums,
                                         const AdafactorParams& hp) {
    const char* op = "adafactor_partial_sums";
    check_piece(piece, op);
    require(param_sq != nullptr && (!piece.factored() || (row_sums != nullptr && col_sums != nullptr)), op,
            "null sum buffer");
    const ParamTensor& t = piece.p;
    if (t.n == 0) return;
    float* partials = scratch_.partials;
    reduce_sum(stream_, partials, t.n, ParamSquare{t}, AddTo{param_sq});
    TUNE_CUDA_CHECK_LAUNCH("adafactor piece param sum");
    if (!piece.factored()) return;
    const math::AdafactorHyper h = hyper(hp);
    // The piece covers rows [r0, r1); within one row only its columns [c0, c1).
    const std::int64_t cols = piece.cols, r0 = piece.begin / cols, r1 = (piece.begin + t.n - 1) / cols + 1;
    const bool one_row = r1 - r0 == 1;
    const std::int64_t c0 = one_row ? piece.begin - r0 * cols : 0, c1 = one_row ? piece.begin + t.n - r0 * cols : cols;
    const auto blocks = static_cast<unsigned>(r1 - r0);
    TUNE_LAUNCH(piece_row_sums_kernel, blocks, kThreads, 0, stream_)(t, piece.begin, cols, r0, row_sums, h);
    const auto tiles = static_cast<unsigned>((c1 - c0 + kTileColumns - 1) / kTileColumns);
    TUNE_LAUNCH(piece_col_sums_kernel, tiles, dim3(kTileColumns, kTileRows), 0, stream_)
    (t, piece.begin, cols, r0, r1, c0, c1, col_sums, h);
    TUNE_CUDA_CHECK_LAUNCH("adafactor piece row/column sums");
}

void CudaBackend::adafactor_statistics(const AdafactorPiece& piece, const float* row_sums, const float* col_sums,
                                       float* row_mean, float* update_sq, const AdafactorParams& hp) {
    const char* op = "adafactor_statistics";
    check_piece(piece, op);
    require(update_sq != nullptr &&
                (!piece.factored() || (row_sums != nullptr && col_sums != nullptr && row_mean != nullptr)),
            op, "null sum buffer");
    const math::AdafactorHyper h = hyper(hp);
    const float beta2t = math::adafactor_beta2t(static_cast<int>(hp.step), h);
    const ParamTensor& t = piece.p;
    float* partials = scratch_.partials;
    if (piece.factored()) {
        // Every rank, its piece empty or not: the whole statistics, then their mean row.
        TUNE_LAUNCH(factored_ema_kernel, grid_for(piece.rows + piece.cols), kThreads, 0, stream_)
        (piece.row_stat, piece.col_stat, piece.state, row_sums, col_sums, piece.rows, piece.cols, beta2t);
        const StatValue stat{piece.row_stat, piece.state};
        const StoreMean store{row_mean, static_cast<float>(piece.rows)};
        reduce_sum(stream_, partials, piece.rows, stat, store);
        TUNE_CUDA_CHECK_LAUNCH("adafactor piece statistics");
    } else if (t.n > 0) {
        TUNE_LAUNCH(vector_stats_kernel, grid_for(t.n), kThreads, 0, stream_)
        (t, piece.row_stat, piece.state, beta2t, h);
        TUNE_CUDA_CHECK_LAUNCH("adafactor piece statistics");
    }
    if (t.n == 0) return;
    // update_sq += sum over the piece of the unclipped update^2.
    const UpdateSquare square{t, piece_factors(piece, row_mean)};
    reduce_sum(stream_, partials, t.n, square, AddTo{update_sq});
    TUNE_CUDA_CHECK_LAUNCH("adafactor piece update sum");
}

void CudaBackend::adafactor_apply(const AdafactorPiece& piece, const float* param_sq, const float* row_mean,
                                  const float* update_sq, const AdafactorParams& hp) {
    const char* op = "adafactor_apply";
    check_piece(piece, op);
    require(param_sq != nullptr && update_sq != nullptr && (!piece.factored() || row_mean != nullptr), op,
            "null sum buffer");
    if (piece.p.n == 0) return;
    const math::AdafactorHyper h = hyper(hp);
    auto* scalars = reinterpret_cast<Scalars*>(scratch_.partials + 2 * BackendScratch::kPartials);
    const auto count = static_cast<float>(piece.rows * piece.cols);
    TUNE_LAUNCH(piece_scalars_kernel, 1, 1, 0, stream_)
    (scalars, param_sq, update_sq, count, static_cast<int>(hp.step), h);
    TUNE_CUDA_CHECK_LAUNCH("adafactor piece lr");
    update_params(stream_, piece.p, ApplyRule{piece_factors(piece, row_mean), scalars, h});
}

}  // namespace tune::kernels::cuda
