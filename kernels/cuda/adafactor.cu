// Adafactor (transformers.optimization.Adafactor, beta1 = None), every step
// on the device with no host round trip: RMS(p) -> lr, second-moment
// statistics (rows by block, columns by tile, or whole for vectors), the
// mean of the row statistics, RMS of the update -> clip divisor, then the
// update. Scalars pass between kernels through the backend's scratch.
#include "kernels/cuda/cuda_backend.cuh"
#include "kernels/cuda/optimizer_loop.cuh"
#include "kernels/cuda/reduce.cuh"
#include "kernels/cuda/reductions.cuh"
#include "kernels/math/adafactor.h"

namespace tune::kernels::cuda {

namespace {

// Device scalars computed by one kernel and read by the next.
struct Scalars {
    float lr, row_mean, divisor;
};

struct Factors {
    const void* row;
    const void* col;
    DType state;
    std::int64_t cols;
    bool factored;
};

__device__ float adafactor_grad(const ParamTensor& t, std::int64_t i) {
    return load_any(t.grad, t.grad_dtype, i) * t.grad_scale;
}

// The update of element i before clipping, from the new statistics.
__device__ float update_value(const Factors& f, const Scalars* s, float g, std::int64_t i) {
    if (!f.factored) return math::adafactor_unfactored_update(g, load_any(f.row, f.state, i));
    return math::adafactor_factored_update(g, load_any(f.row, f.state, i / f.cols), s->row_mean,
                                           load_any(f.col, f.state, i % f.cols));
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
    __device__ void operator()(float total) const { s->lr = math::adafactor_lr(math::rms_from_sum_sq(total, n), step, h); }
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
    const Scalars* s;
    __device__ float operator()(std::int64_t i) const {
        const float u = update_value(f, s, adafactor_grad(t, i), i);
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
    bool decay;
    __device__ void operator()(float& p, float g, std::int64_t i) const {
        p = math::adafactor_apply(p, update_value(f, s, g, i), s->lr, s->divisor, h, decay);
    }
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
        for (std::int64_t r = threadIdx.y; r < rows; r += kTileRows) acc += math::adafactor_sq(adafactor_grad(t, r * cols + j), h);
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

}  // namespace

void CudaBackend::adafactor_update(const ParamTensor& t, std::int64_t rows, std::int64_t cols, void* row_stat,
                                   void* col_stat, DType sd, const AdafactorParams& hp) {
    const char* op = "adafactor_update";
    check_param(t, op);
    require(rows > 0 && cols > 0 && rows * cols == t.n && rows <= 0x7fffffff, op, "rows * cols must equal n");
    require(is_float(sd), op, "state must be float storage");
    const bool factored = rows > 1 && cols > 1;
    math::AdafactorHyper h;
    h.eps1 = hp.eps1, h.eps2 = hp.eps2, h.clip_threshold = hp.clip_threshold, h.decay_rate = hp.decay_rate;
    h.weight_decay = hp.weight_decay, h.scale_parameter = hp.scale_parameter, h.relative_step = hp.relative_step;
    h.warmup_init = false, h.lr = hp.lr;
    const int step = static_cast<int>(hp.step);
    const float beta2t = math::adafactor_beta2t(step, h);
    const auto n = static_cast<float>(t.n);
    float* partials = scratch_.partials;
    auto* scalars = reinterpret_cast<Scalars*>(scratch_.partials + 2 * BackendScratch::kPartials);
    const Factors f{row_stat, col_stat, sd, cols, factored};

    // RMS(p) before the update -> this tensor's learning rate.
    partial_sums_kernel<<<kReduceBlocks, kThreads, 0, stream_>>>(partials, t.n, ParamSquare{t});
    finish_sum_kernel<<<1, kReduceBlocks, 0, stream_>>>(partials, SetLr{scalars, n, step, h});
    TUNE_CUDA_CHECK_LAUNCH("adafactor lr");
    if (factored) {
        row_stats_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream_>>>(t, row_stat, sd, cols, beta2t, h);
        const auto tiles = static_cast<unsigned>((cols + kTileColumns - 1) / kTileColumns);
        col_stats_kernel<<<tiles, dim3(kTileColumns, kTileRows), 0, stream_>>>(t, col_stat, sd, rows, cols, beta2t, h);
        partial_sums_kernel<<<kReduceBlocks, kThreads, 0, stream_>>>(partials, rows, StatValue{row_stat, sd});
        finish_sum_kernel<<<1, kReduceBlocks, 0, stream_>>>(partials, SetRowMean{scalars, static_cast<float>(rows)});
    } else {
        vector_stats_kernel<<<grid_for(t.n), kThreads, 0, stream_>>>(t, row_stat, sd, beta2t, h);
    }
    TUNE_CUDA_CHECK_LAUNCH("adafactor statistics");
    // RMS of the update -> clip divisor.
    partial_sums_kernel<<<kReduceBlocks, kThreads, 0, stream_>>>(partials, t.n, UpdateSquare{t, f, scalars});
    finish_sum_kernel<<<1, kReduceBlocks, 0, stream_>>>(partials, SetDivisor{scalars, n, h});
    TUNE_CUDA_CHECK_LAUNCH("adafactor clip");
    update_params(stream_, t, ApplyRule{f, scalars, h, t.decay});
}

}  // namespace tune::kernels::cuda
