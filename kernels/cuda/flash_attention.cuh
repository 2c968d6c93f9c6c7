// What the two flash attention implementations share: the kernels'
// arguments, the device exp, and the tensor-core path's entry points
// (flash_attention_tc.cu), which flash_attention.cu calls for the shapes
// and dtypes flash_tensor_cores() accepts.
#pragma once

#include <cuda_runtime.h>
#include <math.h>

#include <cstdint>

#include "kernels/dtype.h"

namespace tune::kernels::cuda {

// Shapes and pointers every flash kernel reads. Strides are in elements.
struct FlashArgs {
    const void *q, *k, *v, *out, *dout;
    void *o, *dq, *dk, *dv;
    float* lse;
    const float* lse_in;
    std::int64_t q_stride, k_stride, v_stride, out_stride, dout_stride;
    std::int64_t seq, heads, kv_heads, head_dim;
    float scale;
};

struct DeviceExp {
    __device__ float operator()(float x) const { return expf(x); }
};

// bf16 and fp16 at head dims 64 and 128 run on tensor cores (WMMA); fp32
// and other head dims on CUDA cores.
inline bool flash_tensor_cores(DType dtype, std::int64_t head_dim) {
    return (dtype == DType::bf16 || dtype == DType::f16) && (head_dim == 64 || head_dim == 128);
}

// Launch the tensor-core kernels; the caller has checked the grid limits (check_flash).
void flash_forward_tensor_cores(const FlashArgs& a, DType dtype, std::int64_t batch, cudaStream_t stream);
void flash_backward_tensor_cores(const FlashArgs& a, DType dtype, std::int64_t batch, cudaStream_t stream);

}  // namespace tune::kernels::cuda
