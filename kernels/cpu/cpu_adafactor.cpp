// Adafactor (transformers.optimization.Adafactor, beta1 = None) in three
// passes over the tensor, none of which stores the update: second-moment
// statistics, the RMS of the update, then the update itself.
#include <algorithm>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/optimizer_loop.h"
#include "kernels/cpu/reduce.h"
#include "kernels/math/adafactor.h"

namespace tune::kernels {

namespace {

constexpr std::int64_t kColumnBlock = 64;

// Row and column running means of g^2 + eps1 for a (rows, cols) gradient.
void factored_stats(const ParamTensor& t, std::int64_t rows, std::int64_t cols, void* row_stat, void* col_stat,
                    DType sd, const math::AdafactorHyper& h, float beta2t, int threads) {
    auto sq = [&](std::int64_t i) {
        return math::adafactor_sq(cpu::load_any(t.grad, t.grad_dtype, i) * t.grad_scale, h);
    };
#pragma omp parallel for num_threads(threads) schedule(static)
    for (std::int64_t r = 0; r < rows; ++r) {
        float acc = 0;
        for (std::int64_t j = 0; j < cols; ++j) acc += sq(r * cols + j);
        cpu::store_any(row_stat, sd, r, math::adafactor_ema(cpu::load_any(row_stat, sd, r), acc / static_cast<float>(cols), beta2t));
    }
    const std::int64_t blocks = (cols + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (std::int64_t b = 0; b < blocks; ++b) {
        const std::int64_t j0 = b * kColumnBlock, j1 = std::min(cols, j0 + kColumnBlock);
        float acc[kColumnBlock] = {};
        for (std::int64_t r = 0; r < rows; ++r)
            for (std::int64_t j = j0; j < j1; ++j) acc[j - j0] += sq(r * cols + j);
        for (std::int64_t j = j0; j < j1; ++j)
            cpu::store_any(col_stat, sd, j,
                           math::adafactor_ema(cpu::load_any(col_stat, sd, j), acc[j - j0] / static_cast<float>(rows), beta2t));
    }
}

}  // namespace

void CpuBackend::adafactor_update(const ParamTensor& t, std::int64_t rows, std::int64_t cols, void* row_stat,
                                  void* col_stat, DType sd, const AdafactorParams& hp) {
    cpu::check_param(t, "adafactor_update");
    cpu::require(rows * cols == t.n && rows > 0 && cols > 0, "adafactor_update", "rows * cols must equal n");
    cpu::require(is_float(sd), "adafactor_update", "state must be float storage");
    const bool factored = rows > 1 && cols > 1;
    const math::AdafactorHyper h{.eps1 = hp.eps1, .eps2 = hp.eps2, .clip_threshold = hp.clip_threshold,
                                 .decay_rate = hp.decay_rate, .weight_decay = hp.weight_decay,
                                 .scale_parameter = hp.scale_parameter, .relative_step = hp.relative_step,
                                 .warmup_init = false, .lr = hp.lr};
    const int t_step = static_cast<int>(hp.step);
    const auto count = static_cast<float>(t.n);
    const double sum_p2 = cpu::blocked_sum(t.n, threads_, [&](std::int64_t i) {
        const double p = cpu::load_any(t.param, t.param_dtype, i);
        return p * p;
    });
    const float lr = math::adafactor_lr(math::rms_from_sum_sq(static_cast<float>(sum_p2), count), t_step, h);
    const float beta2t = math::adafactor_beta2t(t_step, h);
    auto grad = [&](std::int64_t i) { return cpu::load_any(t.grad, t.grad_dtype, i) * t.grad_scale; };

    // Pass 1: statistics.
    float row_mean = 1;
    if (factored) {
        factored_stats(t, rows, cols, row_stat, col_stat, sd, h, beta2t, threads_);
        double sum = 0;
        for (std::int64_t r = 0; r < rows; ++r) sum += cpu::load_any(row_stat, sd, r);
        row_mean = static_cast<float>(sum / static_cast<double>(rows));
    } else {
#pragma omp parallel for num_threads(threads_) schedule(static)
        for (std::int64_t i = 0; i < t.n; ++i) {
            const float sq = math::adafactor_sq(grad(i), h);
            cpu::store_any(row_stat, sd, i, math::adafactor_ema(cpu::load_any(row_stat, sd, i), sq, beta2t));
        }
    }
    auto update = [&](float g, std::int64_t i) {
        if (!factored) return math::adafactor_unfactored_update(g, cpu::load_any(row_stat, sd, i));
        return math::adafactor_factored_update(g, cpu::load_any(row_stat, sd, i / cols), row_mean,
                                               cpu::load_any(col_stat, sd, i % cols));
    };

    // Pass 2: RMS of the update, for clipping.
    const double sum_u2 = cpu::blocked_sum(t.n, threads_, [&](std::int64_t i) {
        const double u = update(grad(i), i);
        return u * u;
    });
    const float divisor = math::adafactor_clip_divisor(static_cast<float>(sum_u2), count, h);

    // Pass 3: the update, with decoupled weight decay on matrices.
    cpu::update_blocks(t, threads_, [&](cpu::ParamBlock& b) {
        for (std::int64_t i = 0; i < b.len; ++i)
            b.p[i] = math::adafactor_apply(b.p[i], update(b.g[i], b.begin + i), lr, divisor, h, t.decay);
    });
}

}  // namespace tune::kernels
