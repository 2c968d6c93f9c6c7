// Internal to the CPU backend: the small fp32 products of flash attention's
// tiles (at most kCpuFlashTile by kCpuFlashTile by head_dim), written out
// instead of called through sgemm. At 64 x 64 x 64 a sgemm call is mostly
// packing and dispatch, and OpenBLAS's runtime core detection may fall back
// to its SSE kernels on a CPU it does not know (it does on this project's
// Xeon build machine). C = alpha op(A) B + beta C, B and C row-major; beta
// 0 never reads C.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/cpu/fp32_gemm.h"

namespace tune::kernels::cpu {

// op(A) is A (m, k) when !ta, else A^T with A stored (k, m). Runs the widest
// variant this CPU supports.
void tile_mm(bool ta, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, Mat a, Mat b, float beta, Mat c);

// The register-blocked variants, widest last: SSE (any x86-64 or other CPU),
// AVX2 + FMA (x86-64-v3) and AVX-512 (x86-64-v4).
enum class TileIsa { baseline, x86_64_v3, x86_64_v4 };

// The variants this CPU can run, so a test checks each, not only the one
// tile_mm picks here (a CI machine without AVX-512 runs the AVX2 one).
std::vector<TileIsa> runnable_tile_isas();
const char* to_string(TileIsa isa);
void tile_mm_on(TileIsa isa, bool ta, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, Mat a, Mat b,
                float beta, Mat c);

}  // namespace tune::kernels::cpu
