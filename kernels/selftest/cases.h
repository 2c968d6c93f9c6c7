// The standard self-test cases, one function per group of ops.
#pragma once

#include <string>
#include <vector>

#include "kernels/selftest/selftest.h"

namespace tune::kernels::selftest {

void add_gemm_cases(std::vector<Case>& out);
void add_attention_cases(std::vector<Case>& out);
void add_layer_cases(std::vector<Case>& out);        // embedding, rmsnorm, rope, swiglu, cross-entropy
void add_elementwise_cases(std::vector<Case>& out);  // add, scale, cast, unscale, sum_squares, neftune
void add_optimizer_cases(std::vector<Case>& out);
void add_nf4_cases(std::vector<Case>& out);  // QLoRA's NF4 quantize and dequantize

inline const DType kFloatTypes[] = {DType::f32, DType::bf16, DType::f16};

inline std::string name_of(DType t) { return std::string(dtype_name(t)); }

}  // namespace tune::kernels::selftest
