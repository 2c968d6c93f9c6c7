// How close the CUDA backend must come to the CPU backend, per kind of op and
// storage dtype. Both backends run the same kernels/math rules in fp32, so
// differences come only from summation order, fused multiply-adds, the
// device's transcendental functions, and one-ulp rounding flips when a
// 16-bit result is stored. The numbers are first estimates from those
// sources, not yet calibrated on a GPU (see README: nothing has run on one).
#pragma once

#include <string_view>

#include "kernels/compare.h"
#include "kernels/dtype.h"

namespace tune::kernels::selftest {

enum class OpClass {
    exact,          // data movement and single-rounding ops: embedding gather, cast, add, scale
    elementwise,    // one element's rule with transcendentals or FMAs: rope, swiglu, neftune
    reduction,      // per-row or whole-buffer sums: rmsnorm, cross-entropy, sum_squares
    matmul,         // GEMMs and attention (long fp32 dot products, 16-bit intermediates)
    optimizer,      // optimizer updates (parameters and fp32/16-bit states)
    codes,          // 8-bit quantization codes, compared as indices: a one-step flip is allowed
    training,       // per-step losses of a short training run, fp32 precision
    training_half,  // the same with 16-bit weights or activations (bf16/fp16, mixed or pure)
};

std::string_view op_class_name(OpClass c);

struct Tolerance {
    double max_nmse = 0;
    double max_abs = 0;
};

// The table; dtype is the storage type of the compared output.
Tolerance tolerance_for(OpClass op_class, DType dtype);

inline bool passes(const ErrorStats& stats, const Tolerance& tol) { return within(stats, tol.max_nmse, tol.max_abs); }

}  // namespace tune::kernels::selftest
