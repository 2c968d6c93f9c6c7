// The part of cuda_bf16.h tune uses, for the emulated device: the bf16
// storage type and its raw bits (WMMA's operand type).
#pragma once

struct __nv_bfloat16_raw {
    unsigned short x;
};

struct __nv_bfloat16 {
    __nv_bfloat16() = default;
    constexpr __nv_bfloat16(const __nv_bfloat16_raw& raw) : x_(raw.x) {}
    operator __nv_bfloat16_raw() const { return __nv_bfloat16_raw{x_}; }

private:
    unsigned short x_;
};

using nv_bfloat16 = __nv_bfloat16;
