// Blockwise 8-bit Adam (bitsandbytes): one CUDA block per quantization block.
// The dynamic maps live in constant memory; the per-element rules are
// kernels/math/quant8.h's, the ones the CPU backend runs serially per block.
#include <math.h>

#include "kernels/cuda/cuda_backend.cuh"
#include "kernels/cuda/optimizer_loop.cuh"
#include "kernels/cuda/reduce.cuh"
#include "kernels/math/quant8.h"

namespace tune::kernels::cuda {

namespace {

// Signed map (m) then unsigned map (v). Written once per device by
// upload_quant_maps(), with the same 512 values every time.
__constant__ float c_quant_maps[2 * math::kQuantMapSize];

constexpr std::int64_t kMaxBlock = 4096;

struct Adam8bitState {
    std::uint8_t* m;
    std::uint8_t* v;
    float* absmax_m;
    float* absmax_v;
};

// Block b owns elements [b * block, min(n, (b + 1) * block)): pass 1 finds
// the new absmax of m and v, pass 2 recomputes the moments, updates p and
// requantizes with it (math::adam8bit_block, spread over the block's threads).
__global__ void adam8bit_kernel(ParamTensor t, Adam8bitState s, std::int64_t block, math::Adam8bitHyper h,
                                math::Adam8bitStep host_step, const std::int32_t* device_step) {
    const math::Adam8bitStep step = device_step != nullptr ? math::adam8bit_step(h, *device_step, t.decay) : host_step;
    __shared__ float shared[32];
    const math::Adam8bitMaps maps{c_quant_maps, c_quant_maps + math::kQuantMapSize};
    const std::int64_t b = blockIdx.x, begin = b * block;
    const std::int64_t end = begin + block < t.n ? begin + block : t.n;
    const float old_m = s.absmax_m[b], old_v = s.absmax_v[b];
    float max_m = 0.0f, max_v = 0.0f;
    for (std::int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
        const float g = load_any(t.grad, t.grad_dtype, i) * grad_scale_of(t);
        if (!math::is_finite(g)) continue;
        float m, v;
        math::adam8bit_moments(maps, s.m[i], s.v[i], old_m, old_v, g, h, m, v);
        max_m = fmaxf(max_m, fabsf(m));
        max_v = fmaxf(max_v, fabsf(v));
    }
    const float new_m = block_max(max_m, shared);
    const float new_v = block_max(max_v, shared);
    const float inv_m = math::inverse_absmax(new_m), inv_v = math::inverse_absmax(new_v);
    for (std::int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
        const float g = load_any(t.grad, t.grad_dtype, i) * grad_scale_of(t);
        float m = 0.0f, v = 0.0f;
        if (math::is_finite(g)) {
            math::adam8bit_moments(maps, s.m[i], s.v[i], old_m, old_v, g, h, m, v);
            const float p = math::adam8bit_param(load_any(t.param, t.param_dtype, i), m, v, step);
            store_any(t.param, t.param_dtype, i, p);
        }
        if (t.param_copy != nullptr) store_any(t.param_copy, t.copy_dtype, i, load_any(t.param, t.param_dtype, i));
        s.m[i] = math::requantize_m(maps.signed_code, m, inv_m);
        s.v[i] = math::quantize_to_map(maps.unsigned_code, false, v * inv_v);
    }
    if (threadIdx.x == 0) {
        s.absmax_m[b] = new_m;
        s.absmax_v[b] = new_v;
    }
}

}  // namespace

void upload_quant_maps() {
    float maps[2 * math::kQuantMapSize];
    math::create_dynamic_map(true, maps);
    math::create_dynamic_map(false, maps + math::kQuantMapSize);
    TUNE_CUDA_CHECK(cudaMemcpyToSymbol(c_quant_maps, maps, sizeof maps));
}

void CudaBackend::adam8bit_update(const ParamTensor& t, std::uint8_t* m_codes, std::uint8_t* v_codes, float* absmax_m,
                                  float* absmax_v, const Adam8bitParams& hp) {
    check_param(t, "adam8bit_update");
    check_single_tensor(t, "cuda", "adam8bit_update");
    require(hp.block_size > 0 && hp.block_size <= kMaxBlock, "adam8bit_update", "block_size must be in [1, 4096]");
    if (t.n == 0) return;
    math::Adam8bitHyper h;
    h.lr = hp.adam.lr, h.beta1 = hp.adam.beta1, h.beta2 = hp.adam.beta2, h.eps = hp.adam.eps;
    h.weight_decay = hp.adam.weight_decay, h.block_size = static_cast<int>(hp.block_size);
    const math::Adam8bitStep step = math::adam8bit_step(h, static_cast<int>(hp.adam.step), t.decay);
    const std::int64_t blocks = (t.n + hp.block_size - 1) / hp.block_size;
    require(blocks <= 0x7fffffff, "adam8bit_update", "too many blocks");
    const int threads = hp.block_size >= kThreads ? kThreads : 32 * static_cast<int>((hp.block_size + 31) / 32);
    TUNE_LAUNCH(adam8bit_kernel, static_cast<unsigned>(blocks), threads, 0, stream_)
    (t, Adam8bitState{m_codes, v_codes, absmax_m, absmax_v}, hp.block_size, h, step, hp.adam.device_step);
    TUNE_CUDA_CHECK_LAUNCH("adam8bit_kernel");
}

}  // namespace tune::kernels::cuda
