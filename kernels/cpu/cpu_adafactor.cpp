// Adafactor (transformers.optimization.Adafactor, beta1 = None) over the
// piece of a tensor a rank owns, in the three passes of kernels/backend.h:
// partial sums (RMS(p), row and column sums of g^2), statistics (+ RMS of
// the update), then the update. None stores the update. adafactor_update is
// the three passes over the whole tensor with nothing to complete between.
#include <algorithm>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/optimizer_loop.h"
#include "kernels/cpu/reduce.h"
#include "kernels/math/adafactor.h"

namespace tune::kernels {

namespace {

constexpr std::int64_t kColumnBlock = 64;

math::AdafactorHyper hyper(const AdafactorParams& hp) {
    return {.eps1 = hp.eps1,
            .eps2 = hp.eps2,
            .clip_threshold = hp.clip_threshold,
            .decay_rate = hp.decay_rate,
            .weight_decay = hp.weight_decay,
            .scale_parameter = hp.scale_parameter,
            .relative_step = hp.relative_step,
            .warmup_init = false,
            .lr = hp.lr};
}

void check_piece(const AdafactorPiece& piece, const char* op) {
    cpu::check_param(piece.p, op);
    check_single_tensor(piece.p, "cpu", op);
    cpu::require(
        piece.rows > 0 && piece.cols > 0 && piece.begin >= 0 && piece.begin + piece.p.n <= piece.rows * piece.cols, op,
        "the piece must lie inside the (rows, cols) tensor");
    cpu::require(is_float(piece.state), op, "state must be float storage");
    cpu::require(!piece.factored() || (piece.row_stat != nullptr && piece.col_stat != nullptr), op,
                 "a matrix needs row and column statistics");
}

float piece_grad(const AdafactorPiece& piece, std::int64_t i) {
    return cpu::load_any(piece.p.grad, piece.p.grad_dtype, i) * cpu::grad_scale_of(piece.p);
}

// The piece's columns [j0, j1) of row r, as piece-local element indices [first, first + (j1 - j0)).
struct RowSpan {
    std::int64_t j0 = 0, j1 = 0, first = 0;
};
RowSpan row_span(const AdafactorPiece& piece, std::int64_t r) {
    const std::int64_t lo = std::max(piece.begin, r * piece.cols);
    const std::int64_t hi = std::min(piece.begin + piece.p.n, (r + 1) * piece.cols);
    if (hi <= lo) return {};
    return {lo - r * piece.cols, hi - r * piece.cols, lo - piece.begin};
}

// Row and column sums of g^2 + eps1 over the piece's elements.
void factored_sums(const AdafactorPiece& piece, float* row_sums, float* col_sums, const math::AdafactorHyper& h,
                   int threads) {
    if (piece.p.n == 0) return;
    const std::int64_t r0 = piece.begin / piece.cols, r1 = (piece.begin + piece.p.n - 1) / piece.cols + 1;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (std::int64_t r = r0; r < r1; ++r) {
        const RowSpan span = row_span(piece, r);
        float acc = 0;
        for (std::int64_t j = span.j0; j < span.j1; ++j)
            acc += math::adafactor_sq(piece_grad(piece, span.first + j - span.j0), h);
        row_sums[r] += acc;
    }
    const std::int64_t blocks = (piece.cols + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (std::int64_t b = 0; b < blocks; ++b) {
        const std::int64_t c0 = b * kColumnBlock, c1 = std::min(piece.cols, c0 + kColumnBlock);
        float acc[kColumnBlock] = {};
        for (std::int64_t r = r0; r < r1; ++r) {
            const RowSpan span = row_span(piece, r);
            for (std::int64_t j = std::max(c0, span.j0); j < std::min(c1, span.j1); ++j)
                acc[j - c0] += math::adafactor_sq(piece_grad(piece, span.first + j - span.j0), h);
        }
        for (std::int64_t j = c0; j < c1; ++j) col_sums[j] += acc[j - c0];
    }
}

// The unclipped update of piece element i from the current statistics.
float piece_update(const AdafactorPiece& piece, float g, std::int64_t i, float row_mean) {
    if (!piece.factored()) return math::adafactor_unfactored_update(g, cpu::load_any(piece.row_stat, piece.state, i));
    const std::int64_t e = piece.begin + i;
    return math::adafactor_factored_update(g, cpu::load_any(piece.row_stat, piece.state, e / piece.cols), row_mean,
                                           cpu::load_any(piece.col_stat, piece.state, e % piece.cols));
}

}  // namespace

void CpuBackend::adafactor_partial_sums(const AdafactorPiece& piece, float* param_sq, float* row_sums, float* col_sums,
                                        const AdafactorParams& hp) {
    check_piece(piece, "adafactor_partial_sums");
    const ParamTensor& t = piece.p;
    const double sum_p2 = cpu::blocked_sum(t.n, threads_, [&](std::int64_t i) {
        const double p = cpu::load_any(t.param, t.param_dtype, i);
        return p * p;
    });
    *param_sq += static_cast<float>(sum_p2);
    if (piece.factored()) factored_sums(piece, row_sums, col_sums, hyper(hp), threads_);
}

void CpuBackend::adafactor_statistics(const AdafactorPiece& piece, const float* row_sums, const float* col_sums,
                                      float* row_mean, float* update_sq, const AdafactorParams& hp) {
    check_piece(piece, "adafactor_statistics");
    const math::AdafactorHyper h = hyper(hp);
    const float beta2t = math::adafactor_beta2t(static_cast<int>(hp.step), h);
    const DType sd = piece.state;
    float mean = 1;
    if (piece.factored()) {
        const auto rows = static_cast<float>(piece.rows), cols = static_cast<float>(piece.cols);
        double sum = 0;
        for (std::int64_t r = 0; r < piece.rows; ++r) {
            cpu::store_any(piece.row_stat, sd, r,
                           math::adafactor_ema(cpu::load_any(piece.row_stat, sd, r), row_sums[r] / cols, beta2t));
            sum += cpu::load_any(piece.row_stat, sd, r);
        }
        for (std::int64_t j = 0; j < piece.cols; ++j)
            cpu::store_any(piece.col_stat, sd, j,
                           math::adafactor_ema(cpu::load_any(piece.col_stat, sd, j), col_sums[j] / rows, beta2t));
        mean = static_cast<float>(sum / static_cast<double>(piece.rows));
        *row_mean = mean;
    } else {
#pragma omp parallel for num_threads(threads_) schedule(static)
        for (std::int64_t i = 0; i < piece.p.n; ++i) {
            const float sq = math::adafactor_sq(piece_grad(piece, i), h);
            cpu::store_any(piece.row_stat, sd, i,
                           math::adafactor_ema(cpu::load_any(piece.row_stat, sd, i), sq, beta2t));
        }
    }
    const double sum_u2 = cpu::blocked_sum(piece.p.n, threads_, [&](std::int64_t i) {
        const double u = piece_update(piece, piece_grad(piece, i), i, mean);
        return u * u;
    });
    *update_sq += static_cast<float>(sum_u2);
}

void CpuBackend::adafactor_apply(const AdafactorPiece& piece, const float* param_sq, const float* row_mean,
                                 const float* update_sq, const AdafactorParams& hp) {
    check_piece(piece, "adafactor_apply");
    const math::AdafactorHyper h = hyper(hp);
    const auto count = static_cast<float>(piece.rows * piece.cols);
    const float lr = math::adafactor_lr(math::rms_from_sum_sq(*param_sq, count), static_cast<int>(hp.step), h);
    const float divisor = math::adafactor_clip_divisor(*update_sq, count, h);
    const float mean = piece.factored() ? *row_mean : 1.0f;
    cpu::update_blocks(piece.p, threads_, [&](cpu::ParamBlock& b) {
        for (std::int64_t i = 0; i < b.len; ++i)
            b.p[i] = math::adafactor_apply(b.p[i], piece_update(piece, b.g[i], b.begin + i, mean), lr, divisor, h,
                                           piece.p.decay);
    });
}

void CpuBackend::adafactor_update(const ParamTensor& t, std::int64_t rows, std::int64_t cols, void* row_stat,
                                  void* col_stat, DType sd, const AdafactorParams& hp) {
    cpu::require(rows * cols == t.n && rows > 0 && cols > 0, "adafactor_update", "rows * cols must equal n");
    const AdafactorPiece piece{t, 0, rows, cols, row_stat, col_stat, sd};
    const bool factored = piece.factored();
    std::vector<float> row_sums(factored ? static_cast<std::size_t>(rows) : 0);
    std::vector<float> col_sums(factored ? static_cast<std::size_t>(cols) : 0);
    float param_sq = 0, row_mean = 1, update_sq = 0;
    adafactor_partial_sums(piece, &param_sq, row_sums.data(), col_sums.data(), hp);
    adafactor_statistics(piece, row_sums.data(), col_sums.data(), &row_mean, &update_sq, hp);
    adafactor_apply(piece, &param_sq, &row_mean, &update_sq, hp);
}

}  // namespace tune::kernels
