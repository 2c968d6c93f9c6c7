// Causal attention as cuDNN operation graphs (the backend API through the
// loaded library), which cuDNN's runtime fusion runs as flash-attention
// kernels. cuDNN 9's dedicated SDPA nodes take no causal mask, so the graphs
// spell the computation out in tune's shapes (kernels/backend.h). Forward:
//
//   S     = Q Kᵀ · scale                            (B, H, S, S)  virtual, fp32
//   keep  = row index >= column index               (B, H, S, S)  virtual, bool
//   S'    = keep ? S : masked_value                 (the lowest float)
//   m     = max over keys of S'                     (B, H, S, 1)  virtual
//   E     = exp(S' - m);  l = sum over keys of E    (B, H, S, 1)  virtual
//   stats = m + log l                               (B, H, S, 1)  fp32: tune's log-sum-exp
//   O     = (E / l) V                               (B, S, H, D)  16-bit, P in 16 bits
//
// Backward recomputes P = exp(S' - stats) and, with D = rowsum(dO · O),
//   dV = Pᵀ dO,   dS = P · (dO Vᵀ - D) · scale,   dK = dSᵀ Q,   dQ = dS K,
// dQ through an fp32 accumulator the caller zeroes (B·H·S·D·4 bytes of its workspace).
//
// Q, K, V, O and their gradients keep their (B, S, heads, D) layouts with row
// strides (K and V read transposed through their strides). Grouped KV heads:
// the products that read K or V broadcast them over their group of query
// heads; dK and dV are products per query head, summed over each group.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cuda/host/cudnn_graph_parts.h"
#include "kernels/dtype.h"

namespace tune::kernels::cuda::cudnn {

struct SdpaLayout {
    std::int64_t batch = 0, heads = 0, kv_heads = 0, seq = 0, head_dim = 0;
    // Elements from one token's row to the next (>= heads * head_dim, as in
    // AttentionForwardArgs); the gradients of q, k and v share their strides.
    std::int64_t q_stride = 0, k_stride = 0, v_stride = 0, o_stride = 0, dout_stride = 0;
    DType dtype = DType::bf16;  // bf16 or f16
};

// Why cuDNN's graphs cannot take the layout (f32 data, a stride below its
// row, heads not a multiple of KV heads, an odd or unaligned head size), or empty.
std::string sdpa_layout_problem(const SdpaLayout& l);
// The same for the backward graph, which also needs a whole output-gradient row.
std::string sdpa_backward_problem(const SdpaLayout& l);

// The unique ids the caller binds pointers to at execution.
enum class SdpaTensor : std::int64_t {
    q = 1,
    k,
    v,
    o,
    stats,
    scale,         // by value: 1/sqrt(D)
    masked_value,  // by value: the lowest float
    dout,
    dq,
    dk,
    dv,
    one,             // by value: 1.0
    dq_accumulator,  // fp32 (B, H, S, D), zeroed before each backward
};

// Bytes of the backward's fp32 dQ accumulator, which the caller provides zeroed.
std::int64_t sdpa_dq_accumulator_bytes(const SdpaLayout& l);

// The forward graph: tensors and operations, each finalized (no device needed);
// the operation graph, its engine and plan need a handle (OperationPlan).
class SdpaForwardGraph {
public:
    SdpaForwardGraph(const CudnnApi& api, const SdpaLayout& layout);
    std::vector<void*> operations() const { return parts_.operations(); }

private:
    GraphParts parts_;
};

class SdpaBackwardGraph {
public:
    SdpaBackwardGraph(const CudnnApi& api, const SdpaLayout& layout);
    std::vector<void*> operations() const { return parts_.operations(); }

private:
    GraphParts parts_;
};

}  // namespace tune::kernels::cuda::cudnn
