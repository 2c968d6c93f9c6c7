// Per-rank bytes of the model states: weights, fp32 master weights,
// gradients and optimizer states (docs/memory-model.md §2). Persistent for the
// whole trial; what ZeRO shards.
#pragma once

#include <cstdint>

#include "core/config.h"
#include "core/pipeline_stages.h"
#include "core/zero_plan.h"
#include "estimate/flat_layout.h"

namespace tune {

// What the state formulas depend on, apart from the buffers.
struct StateSettings {
    Optimizer optimizer = Optimizer::adamw;
    Precision precision = Precision::fp32;
    ZeroPlan zero = zero_plan(0);
    std::uint64_t shards = 1;   // the ranks ZeRO shards over: ParallelPlan::zero_shards
    std::uint64_t align = 256;  // flat_alignment(adam8bit_block)
    std::uint64_t adam8bit_block = 256;

    static StateSettings of(const TrialConfig& c);
};

struct ModelStateBytes {
    std::uint64_t params = 0;
    std::uint64_t master = 0;
    std::uint64_t grads = 0;  // the persistent buffer; LOMO's one-tensor gradient is transient
    std::uint64_t optim = 0;

    std::uint64_t total() const { return params + master + grads + optim; }
    ModelStateBytes& operator+=(const ModelStateBytes& o) {
        params += o.params, master += o.master, grads += o.grads, optim += o.optim;
        return *this;
    }
};

// States of `kind.count` identical buffers.
ModelStateBytes model_states(const BufferKind& kind, const StateSettings& s);
// All buffers of the layout.
ModelStateBytes model_states(const FlatLayout& layout, const StateSettings& s);

// Elements a rank holds of `count` buffers of `numel` elements: its shard of each
// (`sharded`), or each whole, padded as the flat buffers are.
std::uint64_t held_numel(std::uint64_t numel, std::uint64_t count, const StateSettings& s, bool sharded);

// QLoRA (§9): one layer's NF4 storage on this rank, whole or (stage 3) its
// shard of whole absmax groups; and at stage 3 the layer gathered from every
// rank before each use (tag comm), else 0.
std::uint64_t nf4_layer_bytes(const FlatLayout& layout, const StateSettings& s);
std::uint64_t nf4_gathered_layer_bytes(const FlatLayout& layout, const StateSettings& s);

// The flat layout one tensor-parallel rank holds: its local matrices' buffers (the whole model's at tp 1).
FlatLayout local_flat_layout(const TrialConfig& c);

// What a configuration trains and keeps (§2, §9): with method full the
// layout's states; with lora the frozen base's weights alone (sharded at
// stage 3) plus the adapters' states, weights, master, gradients and optimizer;
// with qlora the base as NF4 layers (sharded at stage 3 too). `m` is the whole
// model; the bytes are one tensor-parallel rank's, sharded over the dp group.
ModelStateBytes trial_states(const ModelSpec& m, const TrialConfig& c);
// The same for one rank of pipeline stage `stage`: its layers and its parts of the outer buffer.
ModelStateBytes trial_states(const ModelSpec& m, const TrialConfig& c, const PipelineStage& stage);

// `local` (a tensor-parallel rank's model) with the stage's layers, and the flat buffers a rank of the stage holds.
ModelSpec stage_model(const ModelSpec& local, const PipelineStage& stage);
FlatLayout stage_flat_layout(const ModelSpec& local, const TrialConfig& c, const PipelineStage& stage);

}  // namespace tune
