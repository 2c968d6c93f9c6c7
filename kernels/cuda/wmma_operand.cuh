// The tensor cores' operand types for tune's 16-bit storage types, through
// nvcuda::wmma (<mma.h>; tests/cuda_emu/include/mma.h on the emulated
// device). Values move bit for bit: rounding stays kernels/math/half.h's.
#pragma once

#include <mma.h>

#include "kernels/math/half.h"

// Unrolls a loop of constant trip count under nvcc (register arrays indexed
// by its variable stay in registers); nothing for the host compiler.
#if defined(__CUDACC__)
#define TUNE_UNROLL _Pragma("unroll")
#else
#define TUNE_UNROLL
#endif

namespace tune::kernels::cuda {

template <class T>
struct WmmaOperand;
template <>
struct WmmaOperand<::tune::math::bf16> {
    using type = __nv_bfloat16;
};
template <>
struct WmmaOperand<::tune::math::fp16> {
    using type = __half;
};
template <class T>
using WmmaOperandT = typename WmmaOperand<T>::type;

__device__ __forceinline__ __nv_bfloat16 to_operand(::tune::math::bf16 v) {
    __nv_bfloat16_raw r;
    r.x = v.bits;
    return __nv_bfloat16(r);
}

__device__ __forceinline__ __half to_operand(::tune::math::fp16 v) {
    __half_raw r;
    r.x = v.bits;
    return __half(r);
}

}  // namespace tune::kernels::cuda
