// SwiGLU (Llama MLP): out = silu(gate) * up, and its backward, over rows.
// The rule is kernels/math/activations.h's, written here on a sigmoid from
// the vectorizable exp so the row loops vectorize.
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/fast_exp.h"
#include "kernels/cpu/typed.h"
#include "kernels/cpu/vectorize.h"

namespace tune::kernels {

namespace {

inline float sigmoid(float a) { return 1.0f / (1.0f + cpu::exp_vec(-a)); }

template <class T>
TUNE_CPU_CLONES void swiglu_row(T* y, const T* g, const T* u, std::int64_t f) {
    for (std::int64_t j = 0; j < f; ++j) {
        const float a = cpu::load(g, j);
        cpu::store(y, j, a * sigmoid(a) * cpu::load(u, j));
    }
}

// dup = dout * silu(a); dgate = dout * up * silu'(a), silu' = s (1 + a (1 - s)).
template <class T>
TUNE_CPU_CLONES void swiglu_backward_row(T* dg, T* du, const T* dy, const T* g, const T* u, std::int64_t f) {
    for (std::int64_t j = 0; j < f; ++j) {
        const float a = cpu::load(g, j), b = cpu::load(u, j), d = cpu::load(dy, j);
        const float s = sigmoid(a);
        cpu::store(dg, j, d * b * (s * (1.0f + a * (1.0f - s))));
        cpu::store(du, j, d * (a * s));
    }
}

}  // namespace

void CpuBackend::swiglu_forward(void* out, const void* gate, const void* up, std::int64_t n, std::int64_t f,
                                std::int64_t in_stride, DType dtype) {
    cpu::require(in_stride >= f, "swiglu_forward", "row stride smaller than F");
    cpu::with_float_type(dtype, [&](auto t) {
        using T = decltype(t);
        auto* y = static_cast<T*>(out);
        const auto* g = static_cast<const T*>(gate);
        const auto* u = static_cast<const T*>(up);
#pragma omp parallel for num_threads(threads_) schedule(static)
        for (std::int64_t r = 0; r < n; ++r) swiglu_row(y + r * f, g + r * in_stride, u + r * in_stride, f);
    });
}

void CpuBackend::swiglu_backward(void* dgate, void* dup, const void* dout, const void* gate, const void* up,
                                 std::int64_t n, std::int64_t f, std::int64_t in_stride, DType dtype) {
    cpu::require(in_stride >= f, "swiglu_backward", "row stride smaller than F");
    cpu::with_float_type(dtype, [&](auto t) {
        using T = decltype(t);
        auto* dg = static_cast<T*>(dgate);
        auto* du = static_cast<T*>(dup);
        const auto* dy = static_cast<const T*>(dout);
        const auto* g = static_cast<const T*>(gate);
        const auto* u = static_cast<const T*>(up);
#pragma omp parallel for num_threads(threads_) schedule(static)
        for (std::int64_t r = 0; r < n; ++r) {
            const std::int64_t in = r * in_stride;
            swiglu_backward_row(dg + in, du + in, dy + r * f, g + in, u + in, f);
        }
    });
}

}  // namespace tune::kernels
