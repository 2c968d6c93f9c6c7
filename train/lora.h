// LoRA (Hu et al. 2021) on the Llama layer's linears: a frozen base W (out,
// in) and trained adapters A (r, in), B (out, r) with
//     y = x W^T + s (x A^T) B^T,   s = alpha / r.
// The adapters of all layers live in their own flat buffers, one per layer
// and no outer buffer (the embedding, final norm and head stay frozen), laid
// out like the base's (docs/memory-model.md §9) so ModelState, the
// optimizers and ZeRO act on them unchanged.
#pragma once

#include <cstdint>
#include <optional>

#include "core/config.h"
#include "kernels/backend.h"
#include "train/param_layout.h"

namespace tune::train {

struct LoraSpec {
    std::int64_t rank = 0;
    float scale = 1.0f;                             // alpha / rank
    LoraTargets targets = LoraTargets::all_linear;  // which linears have adapters (core/peft_modules.h)
    ParamLayout layout;                             // the adapters' flat buffers
};

// Adapters are A then B per targeted linear, in layer order (q, k, v, o,
// gate, up, down), the targeted ones only (core/peft_modules.h).
std::size_t lora_targets(LoraTargets targets);
// The adapter slot j of a layer tensor (A at 2j, B at 2j + 1), or nullopt
// when it has none under these targets.
std::optional<std::size_t> lora_slot(LayerTensor t, LoraTargets targets);

// Tensor names are PEFT's without its "base_model.model." prefix:
// "self_attn.q_proj.lora_A.weight" (r, in), "self_attn.q_proj.lora_B.weight" (out, r).
ParamLayout make_adapter_layout(const ModelSpec& model, std::uint32_t rank, LoraTargets targets, std::uint32_t shards,
                                std::uint32_t adam8bit_block);
// The adapters of the rank's shard of the model (core/parallel_plan.h), sharded by ZeRO over the replicas.
LoraSpec make_lora_spec(const TrialConfig& c);
// The adapters of the layers `base` holds (a pipeline stage's), drawn as the whole model's are.
LoraSpec make_lora_spec(const TrialConfig& c, const ParamLayout& base);

// Under tensor parallelism the adapters follow their base's split, as PEFT's
// LoraParallelLinear does (peft/tuners/lora/tp_layer.py): a column-parallel
// base's B by rows and its A whole; a row-parallel base's A by columns and its
// B whole. Where a rank's `local` adapters come from in the whole model's.
LayoutSource adapter_parallel_source(const TrialConfig& c, const ParamLayout& local, ParallelRank at);
// The base layer tensor whose adapters tensor `t` of the adapter layout is (A at 2j, B at 2j + 1).
LayerTensor adapted_tensor(LoraTargets targets, std::size_t t);

// The host values adapters start from, laid out like `layout`: A seeded as
// PEFT's kaiming_uniform(a = sqrt(5)) draws it, U(-1/sqrt(in), 1/sqrt(in)); B zero.
// With `source`, each element is the whole model's adapter's at the element the shard holds there.
std::vector<std::vector<float>> lora_init(const ParamLayout& layout, std::uint64_t seed,
                                          const LayoutSource* source = nullptr);

// One adapted linear of a micro-batch of T tokens, in dtype dt.
struct LoraLinear {
    kernels::Backend& backend;
    kernels::Workspace ws;
    kernels::DType dt;
    std::int64_t T = 0, in = 0, out = 0, r = 0;
    float scale = 1.0f;

    // xa (T, r) = x (T, in) A^T; y (T, out) += s xa B^T.
    void forward(const void* x, const void* a, const void* b, void* xa, void* y) const;
    // xa only (full recompute of a linear whose output is not needed again).
    void project(const void* x, const void* a, void* xa) const;
    // tmp (T, r) = dy (T, out) B; dx (T, in) += s tmp A.
    void backward_input(const void* dy, const void* b, const void* a, void* tmp, void* dx) const;
    // dA (r, in) = s tmp^T x + beta dA; dB (out, r) = s dy^T xa + beta dB (beta 1 adds, 0 overwrites).
    void grad_a(const void* tmp, const void* x, void* da, float beta) const;
    void grad_b(const void* dy, const void* xa, void* db, float beta) const;
};

}  // namespace tune::train
