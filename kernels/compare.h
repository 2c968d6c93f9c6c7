// How far one buffer is from a reference: the error measures the tests and
// `tune selftest` judge backends by. Host buffers only.
#pragma once

#include <cstdint>

#include "kernels/dtype.h"

namespace tune::kernels {

struct ErrorStats {
    double nmse = 0;                        // sum (got - ref)^2 / sum ref^2 (plain sum of squares when ref is all zero)
    double max_abs = 0;                     // max |got - ref|
    std::int64_t worst = -1;                // index of max_abs, -1 when n == 0
    std::int64_t mismatched_nonfinite = 0;  // elements where exactly one side is inf/nan, or they differ in kind
};

// Elements of each buffer are read in their dtype (f32, bf16, f16) and compared in double.
ErrorStats compare_buffers(const void* ref, DType ref_dtype, const void* got, DType got_dtype, std::int64_t n);
ErrorStats compare_buffers(const float* ref, const float* got, std::int64_t n);

// Whether the stats meet a tolerance: no non-finite mismatch, nmse <= max_nmse
// and max_abs <= max_abs_error.
inline bool within(const ErrorStats& e, double max_nmse, double max_abs_error) {
    return e.mismatched_nonfinite == 0 && e.nmse <= max_nmse && e.max_abs <= max_abs_error;
}

}  // namespace tune::kernels
