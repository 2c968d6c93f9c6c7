// The part of cuda_fp16.h tune uses, for the emulated device: the fp16
// storage type and its raw bits (WMMA's operand type). Conversions go
// through kernels/math/half.h, as on the device, so no arithmetic here.
#pragma once

struct __half_raw {
    unsigned short x;
};

struct __half {
    __half() = default;
    constexpr __half(const __half_raw& raw) : x_(raw.x) {}
    operator __half_raw() const { return __half_raw{x_}; }

private:
    unsigned short x_;
};

using half = __half;
