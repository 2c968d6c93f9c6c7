// SwiGLU (Llama MLP): out = silu(gate) * up, and its backward, over rows.
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/typed.h"
#include "kernels/math/activations.h"

namespace tune::kernels {

void CpuBackend::swiglu_forward(void* out, const void* gate, const void* up, std::int64_t n, std::int64_t f,
                                std::int64_t in_stride, DType dtype) {
    cpu::require(in_stride >= f, "swiglu_forward", "row stride smaller than F");
    cpu::with_float_type(dtype, [&](auto t) {
        using T = decltype(t);
        auto* y = static_cast<T*>(out);
        const auto* g = static_cast<const T*>(gate);
        const auto* u = static_cast<const T*>(up);
#pragma omp parallel for num_threads(threads_) schedule(static)
        for (std::int64_t r = 0; r < n; ++r) {
            const T* gr = g + r * in_stride;
            const T* ur = u + r * in_stride;
            T* yr = y + r * f;
            for (std::int64_t j = 0; j < f; ++j) {
                cpu::store(yr, j, math::swiglu(cpu::load(gr, j), cpu::load(ur, j)));
            }
        }
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
            for (std::int64_t j = 0; j < f; ++j) {
                float dgate, dup;
                math::swiglu_backward(cpu::load(g + in, j), cpu::load(u + in, j), cpu::load(dy + r * f, j), dgate,
                                      dup);
                cpu::store(dg + in, j, dgate);
                cpu::store(du + in, j, dup);
            }
        }
    });
}

}  // namespace tune::kernels
