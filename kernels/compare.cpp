// Error measures between two host buffers, computed in double.
#include "kernels/compare.h"

#include <cmath>

#include "kernels/error.h"
#include "kernels/math/half.h"

namespace tune::kernels {

namespace {

double element(const void* p, DType t, std::int64_t i) {
    switch (t) {
        case DType::f32:
            return static_cast<const float*>(p)[i];
        case DType::bf16:
            return math::to_float(static_cast<const math::bf16*>(p)[i]);
        case DType::f16:
            return math::to_float(static_cast<const math::fp16*>(p)[i]);
        default:
            break;
    }
    throw BackendError("compare_buffers: dtype " + std::string(dtype_name(t)) + " is not a float storage type");
}

}  // namespace

ErrorStats compare_buffers(const void* ref, DType ref_dtype, const void* got, DType got_dtype, std::int64_t n) {
    ErrorStats e;
    double err2 = 0, ref2 = 0;
    for (std::int64_t i = 0; i < n; ++i) {
        const double r = element(ref, ref_dtype, i), g = element(got, got_dtype, i);
        if (!std::isfinite(r) || !std::isfinite(g)) {
            // Non-finite values must agree in kind (same inf, or both nan).
            const bool same = (std::isnan(r) && std::isnan(g)) || r == g;
            if (!same) ++e.mismatched_nonfinite;
            continue;
        }
        const double d = std::abs(g - r);
        err2 += d * d;
        ref2 += r * r;
        if (d > e.max_abs || e.worst < 0) {
            e.max_abs = std::max(e.max_abs, d);
            e.worst = i;
        }
    }
    e.nmse = ref2 > 0 ? err2 / ref2 : err2;
    return e;
}

ErrorStats compare_buffers(const float* ref, const float* got, std::int64_t n) {
    return compare_buffers(ref, DType::f32, got, DType::f32, n);
}

}  // namespace tune::kernels
