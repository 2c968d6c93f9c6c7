// The argument checks of Backend ops, written once and called first by every
// backend, so a call one backend refuses is refused by all (the CPU GEMM once
// let batch matrices of C overlap; only CUDA attention required `probs`).
// Each raises BackendError("<backend> backend: <op>: <what>"). What only one
// backend cannot do (CUDA's grid limits, k = 0 in cuBLASLt) stays with it.
#pragma once

#include <cstdint>
#include <string_view>

#include "kernels/backend.h"

namespace tune::kernels {

void require_arg(bool ok, std::string_view backend, std::string_view op, std::string_view what);

// Sizes, dtypes (A = B, a float; C = A or f32), leading dimensions, batch
// matrices of C that are disjoint or interleaved column blocks, and a c_in
// that is C or apart from it.
void check_gemm_args(const GemmArgs& args, std::string_view backend);

// Bytes from an operand's first element to its last, over the batch (a stride-0 operand is one matrix).
std::uint64_t gemm_a_bytes(const GemmArgs& g);
std::uint64_t gemm_b_bytes(const GemmArgs& g);
std::uint64_t gemm_c_bytes(const GemmArgs& g);  // also c_in's
bool disjoint(const void* x, std::uint64_t x_bytes, const void* y, std::uint64_t y_bytes);

// Materialized attention only, heads a multiple of kv_heads, row strides that
// hold their heads, and the probabilities buffer that backward reads.
void check_attention_shape(const AttentionShape& shape, AttentionKind kind, std::int64_t q_stride,
                           std::int64_t k_stride, std::int64_t v_stride, std::string_view backend, std::string_view op);
void check_attention_args(const AttentionForwardArgs& args, std::string_view backend);
void check_attention_args(const AttentionBackwardArgs& args, std::string_view backend);

// RoPE over (B, S, heads, D) rows: D even, strides that hold the heads.
void check_rope_args(std::int64_t batch, std::int64_t seq, std::int64_t heads, std::int64_t head_dim,
                     std::int64_t out_stride, std::int64_t in_stride, std::string_view backend, std::string_view op);

// ParamTensor::undecayed: non-empty ranges, sorted, disjoint and inside [0, n).
void check_undecayed(const ParamTensor& t, std::string_view backend, std::string_view op);
// The optimizers that take one tensor per call (8-bit Adam's blocks, Adafactor's factored rows): no ranges.
void check_single_tensor(const ParamTensor& t, std::string_view backend, std::string_view op);

}  // namespace tune::kernels
