// RMSNorm forward and backward, parallel over rows (and over column blocks
// for the weight gradient, so no two threads write the same element).
#include <algorithm>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/typed.h"
#include "kernels/math/rmsnorm.h"

namespace tune::kernels {

namespace {

constexpr std::int64_t kColumnBlock = 64;

}  // namespace

void CpuBackend::rmsnorm_forward(void* out, float* rstd, const void* x, const void* weight, std::int64_t n,
                                 std::int64_t c, float eps, DType dtype) {
    cpu::require(c > 0 && n >= 0, "rmsnorm_forward", "bad shape");
    cpu::with_float_type(dtype, [&](auto t) {
        using T = decltype(t);
        auto* y = static_cast<T*>(out);
        const auto* in = static_cast<const T*>(x);
        const auto* w = static_cast<const T*>(weight);
#pragma omp parallel for num_threads(threads_) schedule(static)
        for (std::int64_t r = 0; r < n; ++r) {
            const T* row = in + r * c;
            float ss = 0;
            for (std::int64_t j = 0; j < c; ++j) ss += cpu::load(row, j) * cpu::load(row, j);
            const float s = math::rmsnorm_inv_rms(ss, static_cast<int>(c), eps);
            rstd[r] = s;
            T* dst = y + r * c;
            for (std::int64_t j = 0; j < c; ++j)
                cpu::store(dst, j, math::rmsnorm_forward(cpu::load(row, j), cpu::load(w, j), s));
        }
    });
}

// dx per row from sum(dy * w * x); dw per column block over all rows.
void CpuBackend::rmsnorm_backward(void* dx, void* dweight, const void* dout, const void* x, const void* weight,
                                  const float* rstd, std::int64_t n, std::int64_t c, bool accumulate_dx, DType dtype) {
    cpu::require(c > 0 && n >= 0, "rmsnorm_backward", "bad shape");
    cpu::with_float_type(dtype, [&](auto t) {
        using T = decltype(t);
        auto* gx = static_cast<T*>(dx);
        auto* gw = static_cast<T*>(dweight);
        const auto* gy = static_cast<const T*>(dout);
        const auto* in = static_cast<const T*>(x);
        const auto* w = static_cast<const T*>(weight);
#pragma omp parallel for num_threads(threads_) schedule(static)
        for (std::int64_t r = 0; r < n; ++r) {
            const T* xr = in + r * c;
            const T* dyr = gy + r * c;
            T* dxr = gx + r * c;
            float dot = 0;
            for (std::int64_t j = 0; j < c; ++j) dot += cpu::load(dyr, j) * cpu::load(w, j) * cpu::load(xr, j);
            const float mean_dot = dot / static_cast<float>(c);
            for (std::int64_t j = 0; j < c; ++j) {
                const float g =
                    math::rmsnorm_backward_x(cpu::load(xr, j), cpu::load(dyr, j), cpu::load(w, j), rstd[r], mean_dot);
                cpu::store(dxr, j, accumulate_dx ? cpu::load(dxr, j) + g : g);
            }
        }
        const std::int64_t blocks = (c + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for num_threads(threads_) schedule(static)
        for (std::int64_t b = 0; b < blocks; ++b) {
            const std::int64_t j0 = b * kColumnBlock, j1 = std::min(c, j0 + kColumnBlock);
            float acc[kColumnBlock] = {};
            for (std::int64_t r = 0; r < n; ++r)
                for (std::int64_t j = j0; j < j1; ++j)
                    acc[j - j0] +=
                        math::rmsnorm_backward_w(cpu::load(in + r * c, j), cpu::load(gy + r * c, j), rstd[r]);
            for (std::int64_t j = j0; j < j1; ++j) cpu::store(gw, j, cpu::load(gw, j) + acc[j - j0]);
        }
    });
}

}  // namespace tune::kernels
