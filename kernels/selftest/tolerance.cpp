// The self-test's tolerance table.
#include "kernels/selftest/tolerance.h"

namespace tune::kernels::selftest {

std::string_view op_class_name(OpClass c) {
    switch (c) {
        case OpClass::exact:
            return "exact";
        case OpClass::elementwise:
            return "elementwise";
        case OpClass::reduction:
            return "reduction";
        case OpClass::matmul:
            return "matmul";
        case OpClass::optimizer:
            return "optimizer";
        case OpClass::codes:
            return "codes";
        case OpClass::training:
            return "training";
        case OpClass::training_half:
            return "training_half";
    }
    return "?";
}

// Inputs are O(1) (unit normals), so max_abs is about one 16-bit ulp at the
// largest magnitudes the cases produce (bf16: 2^-8 relative, fp16: 2^-11).
Tolerance tolerance_for(OpClass op_class, DType dtype) {
    const int d = dtype == DType::bf16 ? 1 : (dtype == DType::f16 ? 2 : 0);  // f32, i32, u8 -> column 0
    switch (op_class) {
        case OpClass::exact:
            return {0.0, 0.0};
        case OpClass::elementwise: {
            constexpr Tolerance t[3] = {{1e-12, 1e-5}, {1e-5, 6.25e-2}, {1e-7, 8e-3}};
            return t[d];
        }
        case OpClass::reduction: {
            constexpr Tolerance t[3] = {{1e-10, 1e-4}, {1e-4, 1.25e-1}, {1e-6, 1.6e-2}};
            return t[d];
        }
        case OpClass::matmul: {
            constexpr Tolerance t[3] = {{1e-9, 1e-3}, {1e-4, 2.5e-1}, {1e-5, 3e-2}};
            return t[d];
        }
        case OpClass::optimizer: {
            constexpr Tolerance t[3] = {{1e-8, 1e-3}, {1e-4, 6.25e-2}, {1e-6, 8e-3}};
            return t[d];
        }
        case OpClass::codes:
            return {1e-3, 1.0};
        // Losses are ~ln(vocab); three steps compound every op's differences.
        case OpClass::training:
            return {1e-10, 1e-4};
        case OpClass::training_half:
            return {1e-5, 5e-2};
    }
    return {};
}

}  // namespace tune::kernels::selftest
