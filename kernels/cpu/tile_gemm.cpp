// Register-blocked outer products: each (rows, 2 vectors) block of C stays
// in registers while p runs over k, taking a broadcast element of op(A) and
// two vectors of a row of B per step. One body, instantiated per vector
// width and picked once per process: AVX-512 (x86-64-v4), AVX2 (x86-64-v3)
// or the SSE baseline. Built with -ffp-contract=fast (kernels/CMakeLists.txt)
// so the multiply-adds become FMAs. The ragged edges (m or n not a multiple
// of the block) run one element at a time.
#include "kernels/cpu/tile_gemm.h"

#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

namespace tune::kernels::cpu {

namespace {

// W floats as one vector (spelled per width: GCC drops a vector_size that
// depends on a template parameter).
template <int W>
struct VecOf;
template <>
struct VecOf<4> {
    using type = float __attribute__((vector_size(16)));
};
template <>
struct VecOf<8> {
    using type = float __attribute__((vector_size(32)));
};
template <>
struct VecOf<16> {
    using type = float __attribute__((vector_size(64)));
};
template <int W>
using Vec = typename VecOf<W>::type;

// op(A)(i, p) = a[i * row + p * col].
struct Strided {
    const float* a;
    std::int64_t row, col;
    float operator()(std::int64_t i, std::int64_t p) const { return a[i * row + p * col]; }
};

// C rows [i, i + R), columns [j, j + 2W). Inlined into each target's
// function below: no helper takes or returns a vector, whose calling
// convention differs between targets (-Wpsabi).
template <int W, int R>
__attribute__((always_inline)) inline void block(const Strided& a, std::int64_t i, std::int64_t j, std::int64_t k,
                                                 float alpha, Mat b, float beta, Mat c) {
    static_assert(sizeof(Vec<W>) == 4 * W);
    Vec<W> acc[R][2] = {};
    for (std::int64_t p = 0; p < k; ++p) {
        Vec<W> b0, b1;
        std::memcpy(&b0, b.p + p * b.ld + j, sizeof b0);
        std::memcpy(&b1, b.p + p * b.ld + j + W, sizeof b1);
        for (int r = 0; r < R; ++r) {
            const float x = a(i + r, p);
            acc[r][0] += x * b0;
            acc[r][1] += x * b1;
        }
    }
    for (int r = 0; r < R; ++r)
        for (int h = 0; h < 2; ++h) {
            float* out = c.p + (i + r) * c.ld + j + W * h;
            Vec<W> result = alpha * acc[r][h];
            if (beta != 0.0f) {
                Vec<W> old;
                std::memcpy(&old, out, sizeof old);
                result += beta * old;
            }
            std::memcpy(out, &result, sizeof result);
        }
}

// C rows [i0, i1), columns [j0, j1), one element at a time.
__attribute__((always_inline)) inline void plain(const Strided& a, std::int64_t i0, std::int64_t i1, std::int64_t j0,
                                                 std::int64_t j1, std::int64_t k, float alpha, Mat b, float beta,
                                                 Mat c) {
    for (std::int64_t i = i0; i < i1; ++i)
        for (std::int64_t j = j0; j < j1; ++j) {
            float sum = 0.0f;
            for (std::int64_t p = 0; p < k; ++p) sum += a(i, p) * b.p[p * b.ld + j];
            float& out = c.p[i * c.ld + j];
            out = beta == 0.0f ? alpha * sum : alpha * sum + beta * out;
        }
}

template <int W, int R>
__attribute__((always_inline)) inline void blocked(const Strided& a, std::int64_t m, std::int64_t n, std::int64_t k,
                                                   float alpha, Mat b, float beta, Mat c) {
    const std::int64_t m_full = m / R * R, n_full = n / (2 * W) * (2 * W);
    for (std::int64_t i = 0; i < m_full; i += R)
        for (std::int64_t j = 0; j < n_full; j += 2 * W) block<W, R>(a, i, j, k, alpha, b, beta, c);
    plain(a, 0, m_full, n_full, n, k, alpha, b, beta, c);
    plain(a, m_full, m, 0, n, k, alpha, b, beta, c);
}

using Kernel = void (*)(const Strided&, std::int64_t, std::int64_t, std::int64_t, float, Mat, float, Mat);

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
// 32 vector registers: 8 rows by 2 x 16 floats.
__attribute__((target("arch=x86-64-v4"))) void blocked_v4(const Strided& a, std::int64_t m, std::int64_t n,
                                                          std::int64_t k, float alpha, Mat b, float beta, Mat c) {
    blocked<16, 8>(a, m, n, k, alpha, b, beta, c);
}
// 16 vector registers: 4 rows by 2 x 8 floats.
__attribute__((target("arch=x86-64-v3"))) void blocked_v3(const Strided& a, std::int64_t m, std::int64_t n,
                                                          std::int64_t k, float alpha, Mat b, float beta, Mat c) {
    blocked<8, 4>(a, m, n, k, alpha, b, beta, c);
}
#endif

void blocked_baseline(const Strided& a, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, Mat b, float beta,
                      Mat c) {
    blocked<4, 4>(a, m, n, k, alpha, b, beta, c);
}

bool runnable(TileIsa isa) {
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
    __builtin_cpu_init();
    if (isa == TileIsa::x86_64_v4) return __builtin_cpu_supports("x86-64-v4");
    if (isa == TileIsa::x86_64_v3) return __builtin_cpu_supports("x86-64-v3");
#else
    if (isa != TileIsa::baseline) return false;
#endif
    return true;
}

Kernel kernel_of(TileIsa isa) {
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
    if (isa == TileIsa::x86_64_v4) return blocked_v4;
    if (isa == TileIsa::x86_64_v3) return blocked_v3;
#endif
    return blocked_baseline;
}

void run(Kernel kernel, bool ta, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, Mat a, Mat b, float beta,
         Mat c) {
    const Strided op_a = ta ? Strided{a.p, 1, a.ld} : Strided{a.p, a.ld, 1};
    kernel(op_a, m, n, k, alpha, b, beta, c);
}

}  // namespace

std::vector<TileIsa> runnable_tile_isas() {
    std::vector<TileIsa> out;
    for (TileIsa isa : {TileIsa::baseline, TileIsa::x86_64_v3, TileIsa::x86_64_v4})
        if (runnable(isa)) out.push_back(isa);
    return out;
}

const char* to_string(TileIsa isa) {
    switch (isa) {
        case TileIsa::x86_64_v4:
            return "x86-64-v4 (AVX-512)";
        case TileIsa::x86_64_v3:
            return "x86-64-v3 (AVX2, FMA)";
        case TileIsa::baseline:
            break;
    }
    return "baseline (SSE)";
}

void tile_mm_on(TileIsa isa, bool ta, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, Mat a, Mat b,
                float beta, Mat c) {
    if (!runnable(isa)) throw std::invalid_argument(fmt::format("tile_mm: this CPU cannot run {}", to_string(isa)));
    run(kernel_of(isa), ta, m, n, k, alpha, a, b, beta, c);
}

void tile_mm(bool ta, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, Mat a, Mat b, float beta, Mat c) {
    static const Kernel kernel = kernel_of(runnable_tile_isas().back());
    run(kernel, ta, m, n, k, alpha, a, b, beta, c);
}

}  // namespace tune::kernels::cpu
