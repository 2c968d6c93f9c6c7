// Blockwise 8-bit Adam: each block of block_size elements is dequantized,
// updated and requantized by kernels/math/quant8.h's rule; blocks run in
// parallel since each owns its codes and its absmax.
#include <array>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/optimizer_loop.h"
#include "kernels/math/quant8.h"

namespace tune::kernels {

namespace {

constexpr std::int64_t kMaxBlock = 4096;

struct Maps {
    std::array<float, math::kQuantMapSize> signed_code{}, unsigned_code{};
    Maps() {
        math::create_dynamic_map(true, signed_code.data());
        math::create_dynamic_map(false, unsigned_code.data());
    }
};

}  // namespace

void CpuBackend::adam8bit_update(const ParamTensor& t, std::uint8_t* m_codes, std::uint8_t* v_codes, float* absmax_m,
                                 float* absmax_v, const Adam8bitParams& hp) {
    cpu::check_param(t, "adam8bit_update");
    check_single_tensor(t, "cpu", "adam8bit_update");
    cpu::require(hp.block_size > 0 && hp.block_size <= kMaxBlock, "adam8bit_update", "block_size must be in [1, 4096]");
    const Maps maps;  // 512 floats, cheaper to build than to share
    const math::Adam8bitMaps code{maps.signed_code.data(), maps.unsigned_code.data()};
    const math::Adam8bitHyper h{.lr = hp.adam.lr,
                                .beta1 = hp.adam.beta1,
                                .beta2 = hp.adam.beta2,
                                .eps = hp.adam.eps,
                                .weight_decay = hp.adam.weight_decay,
                                .block_size = static_cast<int>(hp.block_size)};
    const math::Adam8bitStep step = math::adam8bit_step(h, cpu::step_of(hp.adam), t.decay);
    const std::int64_t blocks = (t.n + hp.block_size - 1) / hp.block_size;
    cpu::with_float_type(t.param_dtype, [&](auto pt) {
        using P = decltype(pt);
        auto* param = static_cast<P*>(t.param);
        const float scale = cpu::grad_scale_of(t);
#pragma omp parallel for num_threads(threads_) schedule(static)
        for (std::int64_t b = 0; b < blocks; ++b) {
            const std::int64_t begin = b * hp.block_size, len = std::min(hp.block_size, t.n - begin);
            float g[kMaxBlock];  // the block's gradient, scaled, in fp32
            for (std::int64_t i = 0; i < len; ++i) g[i] = cpu::load_any(t.grad, t.grad_dtype, begin + i) * scale;
            const math::Adam8bitBlock state{m_codes + begin, v_codes + begin, absmax_m + b, absmax_v + b};
            math::adam8bit_block(param + begin, g, static_cast<int>(len), state, code, h, step);
            if (t.param_copy == nullptr) continue;
            for (std::int64_t i = begin; i < begin + len; ++i)
                cpu::store_any(t.param_copy, t.copy_dtype, i, cpu::load(param, i));
        }
    });
}

}  // namespace tune::kernels
