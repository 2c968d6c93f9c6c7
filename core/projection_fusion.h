// When a Llama layer runs projections that share an input as one GEMM each
// way (train/model.h LlamaLayer): q, k and v as one (T, q + 2kv) product
// [q | k | v], gate and up as one (T, 2f) product [g | u], and in backward one
// input gradient [dq dk dv] [Wq; Wk; Wv], [dg du] [Wg; Wu]. It needs the
// weights adjacent in the flat layout (each one's size a multiple of the
// tensor alignment, so no padding falls between them) and nothing that
// applies to one of them alone: an adapter (LoRA, QLoRA), a tensor-parallel
// shard, a bias, Qwen3's q/k norms, or selective_op checkpointing (which keeps
// q, v and gate's outputs and recomputes k's and up's). Nor where the GEMMs
// widen 16-bit operands into fp32 scratch (the CPU backend,
// kernels/cpu/cpu_gemm.cpp): a fused product's scratch is the larger, and full
// checkpointing would then need more memory than selective_op.
// `widening_backend`: the trial runs on such a backend.
#pragma once

#include <cstdint>

#include "core/config.h"

namespace tune {

bool fuses_qkv(const TrialConfig& c, const ModelSpec& model, std::uint64_t tensor_alignment, bool widening_backend);
bool fuses_gate_up(const TrialConfig& c, const ModelSpec& model, std::uint64_t tensor_alignment, bool widening_backend);

}  // namespace tune
