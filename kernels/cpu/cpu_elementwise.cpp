// Element-wise ops over flat buffers: residual add, scale, casts, loss-scale
// unscale with overflow check, partial square norms, NEFTune noise.
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/reduce.h"
#include "kernels/cpu/typed.h"
#include "kernels/math/grad_clip.h"
#include "kernels/math/loss_scale.h"
#include "kernels/math/neftune.h"

namespace tune::kernels {

void CpuBackend::add(void* out, const void* a, const void* b, std::int64_t n, DType dtype) {
    cpu::with_float_type(dtype, [&](auto t) {
        using T = decltype(t);
        auto* o = static_cast<T*>(out);
        const auto* x = static_cast<const T*>(a);
        const auto* y = static_cast<const T*>(b);
#pragma omp parallel for num_threads(threads_) schedule(static)
        for (std::int64_t i = 0; i < n; ++i) cpu::store(o, i, cpu::load(x, i) + cpu::load(y, i));
    });
}

void CpuBackend::scale(void* x, std::int64_t n, float s, DType dtype) {
    cpu::with_float_type(dtype, [&](auto t) {
        using T = decltype(t);
        auto* p = static_cast<T*>(x);
#pragma omp parallel for num_threads(threads_) schedule(static)
        for (std::int64_t i = 0; i < n; ++i) cpu::store(p, i, cpu::load(p, i) * s);
    });
}

void CpuBackend::cast(void* dst, DType dst_dtype, const void* src, DType src_dtype, std::int64_t n) {
    cpu::with_float_type(dst_dtype, [&](auto td) {
        cpu::with_float_type(src_dtype, [&](auto ts) {
            using D = decltype(td);
            using S = decltype(ts);
            auto* d = static_cast<D*>(dst);
            const auto* s = static_cast<const S*>(src);
#pragma omp parallel for num_threads(threads_) schedule(static)
            for (std::int64_t i = 0; i < n; ++i) cpu::store(d, i, cpu::load(s, i));
        });
    });
}

void CpuBackend::unscale(void* x, std::int64_t n, float s, float* found_inf, DType dtype) {
    bool overflow = false;
    cpu::with_float_type(dtype, [&](auto t) {
        using T = decltype(t);
        auto* p = static_cast<T*>(x);
#pragma omp parallel for num_threads(threads_) schedule(static) reduction(|| : overflow)
        for (std::int64_t i = 0; i < n; ++i) {
            const float v = math::unscale(cpu::load(p, i), s, overflow);
            if (s != 1.0f) cpu::store(p, i, v);
        }
    });
    if (overflow) *found_inf = 1.0f;
}

void CpuBackend::sum_squares(float* sum, const void* x, std::int64_t n, DType dtype) {
    cpu::with_float_type(dtype, [&](auto t) {
        using T = decltype(t);
        const auto* p = static_cast<const T*>(x);
        const double total = cpu::blocked_sum(n, threads_, [&](std::int64_t i) {
            const double v = cpu::load(p, i);
            return v * v;
        });
        *sum = static_cast<float>(*sum + total);
    });
}

void CpuBackend::gradient_multiplier(float* out, const float* sums, std::int64_t count, float max_norm,
                                     float loss_scale) {
    cpu::require(count == 1 || count == 2, "gradient_multiplier", "one sum, or a sum and the squares counted twice");
    *out = math::gradient_multiplier(count == 2 ? sums[0] - sums[1] : sums[0], max_norm, loss_scale);
}

void CpuBackend::neftune_noise(void* x, std::int64_t n, float scale, std::uint64_t seed, DType dtype) {
    cpu::with_float_type(dtype, [&](auto t) {
        using T = decltype(t);
        auto* p = static_cast<T*>(x);
#pragma omp parallel for num_threads(threads_) schedule(static)
        for (std::int64_t i = 0; i < n; ++i)
            cpu::store(p, i, math::neftune_noise(cpu::load(p, i), scale, seed, static_cast<std::uint64_t>(i)));
    });
}

}  // namespace tune::kernels
