// Row-major fp32 GEMM through OpenBLAS for the CPU attention kernels (eager
// and flash): C = alpha op(A) op(B) + beta C on blocks with leading dimensions.
#pragma once

#include <cblas.h>

#include <cstdint>

namespace tune::kernels::cpu {

// A row-major fp32 matrix with its leading dimension.
struct Mat {
    float* p;
    std::int64_t ld;
};

inline void mm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, Mat a, Mat b, float beta,
               Mat c) {
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, static_cast<blasint>(m),
                static_cast<blasint>(n), static_cast<blasint>(k), alpha, a.p, static_cast<blasint>(a.ld), b.p,
                static_cast<blasint>(b.ld), beta, c.p, static_cast<blasint>(c.ld));
}

}  // namespace tune::kernels::cpu
