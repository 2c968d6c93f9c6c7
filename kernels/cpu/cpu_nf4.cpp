// NF4 quantize and dequantize (kernels/math/nf4.h) over a whole buffer:
// blocks of 64 in parallel, then the offset (one sequential sum), then the
// 8-bit absmax blocks of 256 in parallel; dequantizing is element-wise.
#include <algorithm>
#include <array>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/typed.h"
#include "kernels/math/nf4.h"

namespace tune::kernels {

namespace {

struct SignedMap {
    std::array<float, math::kQuantMapSize> code{};
    SignedMap() { math::create_dynamic_map(true, code.data()); }
};

void check_nf4(const void* q, const void* data, std::int64_t n, const char* op) {
    cpu::require(n >= 0 && n % math::kNf4Block == 0, op, "n must be a multiple of 64");
    cpu::require(n == 0 || (q != nullptr && data != nullptr), op, "null buffer");
}

}  // namespace

void CpuBackend::nf4_quantize(void* q, const float* x, std::int64_t n, float* absmax) {
    check_nf4(q, x, n, "nf4_quantize");
    cpu::require(n == 0 || absmax != nullptr, "nf4_quantize", "null absmax scratch");
    const math::Nf4Parts p = math::nf4_parts(q, n);
    const std::int64_t blocks = n / math::kNf4Block;
#pragma omp parallel for num_threads(threads_) schedule(static)
    for (std::int64_t b = 0; b < blocks; ++b)
        absmax[b] =
            math::nf4_quantize_block(x + b * math::kNf4Block, math::kNf4Block, p.packed + b * math::kNf4Block / 2);
    *p.offset = math::nf4_absmax_offset(absmax, blocks);
    const SignedMap map;
    const std::int64_t groups = (blocks + math::kNf4AbsmaxBlock - 1) / math::kNf4AbsmaxBlock;
#pragma omp parallel for num_threads(threads_) schedule(static)
    for (std::int64_t g = 0; g < groups; ++g) {
        const std::int64_t first = g * math::kNf4AbsmaxBlock;
        const int count = static_cast<int>(std::min<std::int64_t>(math::kNf4AbsmaxBlock, blocks - first));
        p.scales[g] =
            math::nf4_quantize_absmax_block(map.code.data(), absmax + first, count, *p.offset, p.absmax + first);
    }
}

void CpuBackend::nf4_dequantize(void* out, DType dtype, const void* q, std::int64_t n, std::int64_t begin,
                                std::int64_t count) {
    check_nf4(q, out, n, "nf4_dequantize");
    cpu::require(begin >= 0 && count >= 0 && begin + count <= n, "nf4_dequantize", "range outside the buffer");
    const math::Nf4Parts p = math::nf4_parts(const_cast<void*>(q), n);
    const SignedMap map;
#pragma omp parallel for num_threads(threads_) schedule(static)
    for (std::int64_t i = 0; i < count; ++i)
        cpu::store_any(out, dtype, i, math::nf4_weight(map.code.data(), p, begin + i));
}

}  // namespace tune::kernels
