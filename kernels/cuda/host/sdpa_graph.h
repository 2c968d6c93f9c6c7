// Causal attention as one cuDNN operation graph (the backend API through the
// loaded library), which cuDNN's runtime fusion runs as one flash-attention
// kernel. cuDNN 9's dedicated SDPA nodes take no causal mask, so the graph
// spells the computation out; its shapes are tune's (kernels/backend.h):
//
//   S     = Q Kᵀ · scale                            (B, H, S, S)  virtual, fp32
//   keep  = row index >= column index               (B, H, S, S)  virtual, bool
//   S'    = keep ? S : masked_value                 (the lowest float)
//   m     = max over keys of S'                     (B, H, S, 1)  virtual
//   E     = exp(S' - m);  l = sum over keys of E    (B, H, S, 1)  virtual
//   stats = m + log l                               (B, H, S, 1)  fp32: tune's log-sum-exp
//   O     = (E / l) V                               (B, S, H, D)  16-bit, P in 16 bits
//
// Q, K, V and O keep their (B, S, heads, D) layouts with row strides (K is read
// transposed through its strides); query head h reads key/value head
// h / (H / KVH) by broadcasting, so grouped heads need no copy.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "kernels/cuda/host/cudnn_descriptor.h"
#include "kernels/dtype.h"

namespace tune::kernels::cuda::cudnn {

struct SdpaLayout {
    std::int64_t batch = 0, heads = 0, kv_heads = 0, seq = 0, head_dim = 0;
    // Elements from one token's row to the next (>= heads * head_dim, as in AttentionForwardArgs).
    std::int64_t q_stride = 0, k_stride = 0, v_stride = 0, o_stride = 0;
    DType dtype = DType::bf16;  // bf16 or f16
};

// Why cuDNN's graph cannot take the layout (f32 data, a stride below its
// row, heads not a multiple of KV heads, an odd or unaligned head size), or empty.
std::string sdpa_layout_problem(const SdpaLayout& l);

// The unique ids the caller binds pointers to at execution.
enum class SdpaTensor : std::int64_t { q = 1, k, v, o, stats, scale, masked_value };

// The forward graph's tensors and operations, each finalized (no device
// needed); the operation graph, its engine and plan need a handle (SdpaPlan).
class SdpaForwardGraph {
public:
    SdpaForwardGraph(const CudnnApi& api, const SdpaLayout& layout);

    // The operation descriptors in graph order, for CUDNN_ATTR_OPERATIONGRAPH_OPS.
    std::vector<void*> operations() const;
    const SdpaLayout& layout() const { return layout_; }

private:
    const Descriptor& tensor(DataType type, std::vector<std::int64_t> dims, std::vector<std::int64_t> strides,
                             std::int64_t uid = 0, bool by_value = false);
    const Descriptor& pointwise(PointwiseMode mode, DataType compute, const Descriptor& x, const Descriptor* b,
                                const Descriptor& y, const Descriptor* t = nullptr, std::int64_t axis = -1);
    void matmul(const Descriptor& a, const Descriptor& b, const Descriptor& c);
    void reduction(ReductionOperator op, const Descriptor& x, const Descriptor& y);

    const CudnnApi* api_;
    SdpaLayout layout_;
    std::int64_t next_virtual_uid_ = 100;
    // Deques: an operation holds its tensors' addresses, which must stay put as more are made.
    std::deque<Descriptor> tensors_;
    std::deque<Descriptor> settings_;  // the pointwise, matmul and reduction descriptors operations name
    std::deque<Descriptor> operations_;
};

}  // namespace tune::kernels::cuda::cudnn
