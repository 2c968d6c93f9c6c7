// The element-wise probe: one micro-batch's element-wise ops at a model's
// shapes (estimate/probed_rates.h ElementwiseRate), as the trainer runs them:
// a layer's forward (norms, RoPE, SwiGLU; the residuals enter the GEMMs), its backward, and
// the ops outside the layers (embedding, final norm, cross-entropy).
#pragma once

#include <cstdint>
#include <vector>

#include "estimate/probed_rates.h"
#include "kernels/backend.h"
#include "probe/probe_timing.h"

namespace tune::probe {

// Token ids as the trainer's synthetic ones nearly are: spread over the
// vocabulary, distinct while count <= vocab (2654435761 is prime). On the zeros
// of a fresh scratch every row was token 0, and the CUDA embedding backward sums
// one token's rows in one block, one after another, so the probe timed a
// serial sum no step runs (the probes-and-pace file in docs/results/).
std::vector<std::int32_t> spread_tokens(std::uint64_t count, std::uint64_t vocab);

// One micro-batch's buffers, (tokens, width) row-major in the rate's dtype,
// holding values as a step has them rather than zeros, on which the CPU's fp16
// ops run faster than in a step. No op reads what an op
// of the same sequence writes (RoPE's rotations in place only turn q and k), so
// thousands of calls neither drift to subnormals nor overflow. The gradients the
// trainer accumulates (the norms' dx into the residual's, dw, the table's) grow
// a little every call: dn is small (1e-4) and the table's rows of order 1, so
// that in fp16 the table's gradient stays finite over many thousand calls.
struct ElementwiseOps {
    ElementwiseOps(kernels::Backend& backend, const ElementwiseRate& shape);

    void layer_forward();
    void layer_backward();
    void outer();

    kernels::Backend& backend;
    ElementwiseRate shape;
    kernels::DType dtype;
    std::uint64_t t, b;                 // tokens, bytes per element
    Scratch x, n, dx, dn;               // (t, hidden)
    Scratch w, dw, rstd;                // (hidden), (hidden), (t) fp32
    Scratch q, k;                       // (t, hidden), (t, kv_dim)
    Scratch gate, up, mlp, dgate, dup;  // (t, ffn)
    Scratch logits, dlogits, losses;    // (t, vocab) fp32, (t, vocab), (t) fp32
    Scratch tokens, table, dtable;      // (t + 1) int32, (vocab, hidden) x 2
    std::uint64_t embedding_workspace_bytes;
    Scratch embedding_workspace;
};

// Times the three sequences into e (layer_forward_s, layer_backward_s, outer_s);
// `spent` receives how long the probe ran.
void probe_elementwise(kernels::Backend& backend, ElementwiseRate& e, const ProbeSettings& s, double* spent);

}  // namespace tune::probe
