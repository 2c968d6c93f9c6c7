// Eight consecutive elements loaded or stored as fp32 in one access: 16 bytes
// of 16-bit data, two 16-byte accesses of fp32, where element i's address is
// 16-byte aligned (the caller checks: aligned16). The element-wise loops of
// the optimizers step by packs; W = 1 is the same call, one element at a time,
// for a stretch's tail or a buffer that is not aligned. A run-time dtype is
// switched on once per pack, not per element.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/cuda/launch.cuh"

namespace tune::kernels::cuda {

inline constexpr int kPack = 8;

template <class T>
struct alignas(16) Pack {
    T v[kPack];
};

// Whether element i of p (dtype t) starts a 16-byte boundary; no buffer is aligned enough.
inline bool aligned16(const void* p, DType t, std::int64_t i) {
    return p == nullptr ||
           (reinterpret_cast<std::uintptr_t>(p) + static_cast<std::uintptr_t>(i) * dtype_bytes(t)) % 16 == 0;
}

// Blocks for a grid-stride loop over `packs` packs, then the n - 8 * packs elements after them one by one.
inline unsigned pack_grid(std::int64_t n, std::int64_t packs) { return grid_for(std::max(packs, n - packs * kPack)); }

template <int W, class T>
__device__ __forceinline__ void load_w(const T* p, std::int64_t i, float (&out)[W]) {
    if constexpr (W == kPack) {
        Pack<T> pk;
#if defined(__CUDA_ARCH__)
        pk = *reinterpret_cast<const Pack<T>*>(p + i);
#else
        std::memcpy(&pk, p + i, sizeof pk);  // the emulated device: host C++, no type punning
#endif
        for (int j = 0; j < W; ++j) out[j] = math::to_float(pk.v[j]);
    } else {
        for (int j = 0; j < W; ++j) out[j] = load(p, i + j);
    }
}

template <int W, class T>
__device__ __forceinline__ void store_w(T* p, std::int64_t i, const float (&in)[W]) {
    if constexpr (W == kPack) {
        Pack<T> pk;
        for (int j = 0; j < W; ++j) pk.v[j] = math::from_float<T>(in[j]);
#if defined(__CUDA_ARCH__)
        *reinterpret_cast<Pack<T>*>(p + i) = pk;
#else
        std::memcpy(p + i, &pk, sizeof pk);
#endif
    } else {
        for (int j = 0; j < W; ++j) store(p, i + j, in[j]);
    }
}

// The same for a float buffer whose dtype is known at run time.
template <int W>
__device__ __forceinline__ void load_w(const void* p, DType t, std::int64_t i, float (&out)[W]) {
    switch (t) {
        case DType::bf16:
            load_w<W>(static_cast<const math::bf16*>(p), i, out);
            return;
        case DType::f16:
            load_w<W>(static_cast<const math::fp16*>(p), i, out);
            return;
        default:
            load_w<W>(static_cast<const float*>(p), i, out);
            return;
    }
}

template <int W>
__device__ __forceinline__ void store_w(void* p, DType t, std::int64_t i, const float (&in)[W]) {
    switch (t) {
        case DType::bf16:
            store_w<W>(static_cast<math::bf16*>(p), i, in);
            return;
        case DType::f16:
            store_w<W>(static_cast<math::fp16*>(p), i, in);
            return;
        default:
            store_w<W>(static_cast<float*>(p), i, in);
            return;
    }
}

}  // namespace tune::kernels::cuda
