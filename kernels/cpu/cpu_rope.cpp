// Rotary position embedding, rotate-half convention (Hugging Face Llama):
// pair (i, i + D/2) of every head at position s turns by s * inv_freq(i) (kernels/math/rope.h).
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/typed.h"
#include "kernels/math/rope.h"
#include "kernels/op_checks.h"

namespace tune::kernels {

namespace {

constexpr std::int64_t kMaxHeadDim = 512;

struct RopeLayout {
    std::int64_t batch, seq, heads, head_dim, out_stride, in_stride;
};

// Forward rotation, or its transpose (the backward) when `inverse`.
template <class T>
void rotate(T* out, const T* in, const RopeLayout& l, const math::RopeFrequencies& freq, bool inverse, int threads) {
    const std::int64_t half = l.head_dim / 2;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (std::int64_t s = 0; s < l.seq; ++s) {
        // Angles depend on the position only: compute them once per s.
        float cs[kMaxHeadDim];  // cos, sin per pair
        for (std::int64_t i = 0; i < half; ++i)
            math::rope_cos_sin(static_cast<int>(s), static_cast<int>(i), static_cast<int>(l.head_dim), freq, cs[2 * i],
                               cs[2 * i + 1]);
        for (std::int64_t b = 0; b < l.batch; ++b) {
            const std::int64_t token = b * l.seq + s;
            for (std::int64_t h = 0; h < l.heads; ++h) {
                const T* x = in + token * l.in_stride + h * l.head_dim;
                T* y = out + token * l.out_stride + h * l.head_dim;
                for (std::int64_t i = 0; i < half; ++i) {
                    const float x1 = cpu::load(x, i), x2 = cpu::load(x, i + half);
                    float y1, y2;
                    if (inverse)
                        math::rope_rotate_backward(x1, x2, cs[2 * i], cs[2 * i + 1], y1, y2);
                    else
                        math::rope_rotate(x1, x2, cs[2 * i], cs[2 * i + 1], y1, y2);
                    cpu::store(y, i, y1);
                    cpu::store(y, i + half, y2);
                }
            }
        }
    }
}

void check(const RopeLayout& l) {
    check_rope_args(l.batch, l.seq, l.heads, l.head_dim, l.out_stride, l.in_stride, "cpu", "rope");
    cpu::require(l.head_dim <= kMaxHeadDim, "rope", "head_dim must be at most 512");  // the CPU's stack buffer
}

}  // namespace

void CpuBackend::rope_forward(void* out, std::int64_t out_stride, const void* in, std::int64_t in_stride,
                              std::int64_t batch, std::int64_t seq, std::int64_t heads, std::int64_t head_dim,
                              const math::RopeFrequencies& freq, DType dtype) {
    const RopeLayout l{batch, seq, heads, head_dim, out_stride, in_stride};
    check(l);
    cpu::with_float_type(dtype, [&](auto t) {
        using T = decltype(t);
        rotate(static_cast<T*>(out), static_cast<const T*>(in), l, freq, false, threads_);
    });
}

void CpuBackend::rope_backward(void* din, std::int64_t din_stride, const void* dout, std::int64_t dout_stride,
                               std::int64_t batch, std::int64_t seq, std::int64_t heads, std::int64_t head_dim,
                               const math::RopeFrequencies& freq, DType dtype) {
    const RopeLayout l{batch, seq, heads, head_dim, din_stride, dout_stride};
    check(l);
    cpu::with_float_type(dtype, [&](auto t) {
        using T = decltype(t);
        rotate(static_cast<T*>(din), static_cast<const T*>(dout), l, freq, true, threads_);
    });
}

}  // namespace tune::kernels
