// Storage element types of device buffers. Arithmetic is always fp32 (or
// wider); bf16 and fp16 are real 16-bit storage, u8 holds quantized states,
// i32 holds token ids.
#pragma once

#include <cstdint>
#include <string_view>

namespace tune::kernels {

enum class DType : std::uint8_t { f32, bf16, f16, u8, i32 };

inline constexpr std::uint64_t dtype_bytes(DType t) {
    switch (t) {
        case DType::f32:
            return 4;
        case DType::bf16:
            return 2;
        case DType::f16:
            return 2;
        case DType::u8:
            return 1;
        case DType::i32:
            return 4;
    }
    return 0;
}

inline constexpr std::string_view dtype_name(DType t) {
    switch (t) {
        case DType::f32:
            return "f32";
        case DType::bf16:
            return "bf16";
        case DType::f16:
            return "f16";
        case DType::u8:
            return "u8";
        case DType::i32:
            return "i32";
    }
    return "?";
}

// The floating-point storage types an op may take for tensor data.
inline constexpr bool is_float(DType t) { return t == DType::f32 || t == DType::bf16 || t == DType::f16; }

}  // namespace tune::kernels
