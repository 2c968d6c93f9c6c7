// Argument checks of the CUDA backend's ops that are more than a line:
// plain C++ raising BackendError("cuda backend: op: what"), so the tests
// run them without a GPU and the .cu files keep only launch code.
#pragma once

#include <cstdint>

#include "kernels/backend.h"

namespace tune::kernels::cuda {

void require(bool ok, const char* op, const char* what);

// GEMM: sizes, dtype combinations (A = B, C = A or f32), leading dimensions,
// and batch matrices of C that are disjoint or interleaved column blocks.
void check_gemm_args(const GemmArgs& args);

// Attention: materialized only, heads a multiple of kv_heads, row strides
// that hold their heads, and H*S rows that fit a grid.
void check_attention(const AttentionShape& shape, AttentionKind kind, std::int64_t q_stride, std::int64_t k_stride,
                     std::int64_t v_stride, const char* op);

// RoPE over (B, S, heads, D) rows: D even, strides that hold the heads.
void check_rope(std::int64_t batch, std::int64_t seq, std::int64_t heads, std::int64_t head_dim,
                std::int64_t out_stride, std::int64_t in_stride, const char* op);

}  // namespace tune::kernels::cuda
