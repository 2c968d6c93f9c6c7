// Internal to the CPU backend: run a templated body for the storage type a
// DType names, and read/write elements of any float storage as fp32.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/dtype.h"
#include "kernels/error.h"
#include "kernels/math/half.h"

namespace tune::kernels::cpu {

// f(T{}) with T = float, math::bf16 or math::fp16 for f32, bf16, f16.
template <class F>
decltype(auto) with_float_type(DType t, F&& f) {
    switch (t) {
        case DType::f32:
            return f(float{});
        case DType::bf16:
            return f(math::bf16{});
        case DType::f16:
            return f(math::fp16{});
        default:
            break;
    }
    throw BackendError("cpu backend: dtype " + std::string(dtype_name(t)) + " is not a float storage type");
}

template <class T>
inline float load(const T* p, std::int64_t i) {
    return math::to_float(p[i]);
}

template <class T>
inline void store(T* p, std::int64_t i, float v) {
    p[i] = math::from_float<T>(v);
}

inline void require(bool ok, const char* op, const char* what) {
    if (!ok) throw BackendError(std::string("cpu backend: ") + op + ": " + what);
}

inline void require_workspace(const void* ptr, std::uint64_t have, std::uint64_t need, const char* op) {
    if (need > 0 && (ptr == nullptr || have < need))
        throw BackendError(std::string("cpu backend: ") + op + ": workspace of " + std::to_string(have) +
                           " bytes, needs " + std::to_string(need));
}

}  // namespace tune::kernels::cpu

namespace tune::kernels::cpu {

// Element i of a float buffer whose dtype is known only at run time (a
// predictable branch; used where the arithmetic, not the load, dominates).
inline float load_any(const void* p, DType t, std::int64_t i) {
    switch (t) {
        case DType::bf16:
            return load(static_cast<const math::bf16*>(p), i);
        case DType::f16:
            return load(static_cast<const math::fp16*>(p), i);
        default:
            return static_cast<const float*>(p)[i];
    }
}

inline void store_any(void* p, DType t, std::int64_t i, float v) {
    switch (t) {
        case DType::bf16:
            store(static_cast<math::bf16*>(p), i, v);
            break;
        case DType::f16:
            store(static_cast<math::fp16*>(p), i, v);
            break;
        default:
            static_cast<float*>(p)[i] = v;
            break;
    }
}

}  // namespace tune::kernels::cpu
