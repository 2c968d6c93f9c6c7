// Per-rank memory of one training step, phase by phase, component by
// component, following the allocation schedule of docs/memory-model.md.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>

#include "core/config.h"
#include "core/pipeline_stages.h"
#include "estimate/estimate_options.h"

namespace tune {

// The moments of a step where memory can peak (§4 of the memory model).
enum class Phase : std::uint8_t { forward, head_backward, layer_backward, embed_backward, optimizer_step };
inline constexpr std::size_t kPhaseCount = 5;
inline constexpr std::array<Phase, kPhaseCount> kPhases{Phase::forward, Phase::head_backward, Phase::layer_backward,
                                                        Phase::embed_backward, Phase::optimizer_step};
// Short enough for std::string's small-buffer storage: no allocation per estimate.
inline std::string_view to_string(Phase p) {
    constexpr std::array<std::string_view, kPhaseCount> names{"forward", "head-backward", "layer-backward",
                                                              "embed-backward", "optimizer-step"};
    return names[static_cast<std::size_t>(p)];
}

// The transient sizes the schedule is built from, in bytes per rank.
struct ActivationSizes {
    std::uint64_t io = 0;        // inputs, targets (int32) and per-token losses (fp32)
    std::uint64_t hidden = 0;    // one (T, h) activation: x, xL, nf, dnf, dX (T / tp tokens with sequence parallelism)
    std::uint64_t gathered = 0;  // sequence parallelism: a tensor-parallel region's input gathered whole (T, h); else 0
    std::uint64_t rstd = 0;      // one (T) fp32 RMSNorm statistic
    std::uint64_t probs = 0;     // attention probabilities (b, a, s, s), or the fused kernel's lse
    std::uint64_t kept_none = 0;   // K_none: everything one layer keeps with no recompute
    std::uint64_t op_dropped = 0;  // what selective-op frees of K_none (and recomputes)
    std::uint64_t kept = 0;        // K_mode: what one layer keeps under the configured Checkpointing mode
    std::uint64_t scratch = 0;     // Tmp: the activation-gradient scratch of one layer's backward
    std::uint64_t logits = 0;      // the LM-head workspace (fp32 logits chunk, 16-bit dlogits, GEMM staging)
    std::uint64_t chunk_rows = 0;
};

// The rows of one LM-head chunk (kernels/lm_head_loss.cpp): as many as keep its fp32 logits under 2^24 cells.
std::uint64_t logit_chunk_rows(std::uint64_t tokens, std::uint64_t vocab);

// `m` is the whole model; the sizes are one tensor-parallel rank's (core/parallel_plan.h).
ActivationSizes activation_sizes(const ModelSpec& m, const TrialConfig& c, const Hardware& hw,
                                 const EstimateOptions& o);

// How a saved tensor splits over the tensor-parallel ranks: by heads (or ffn columns) whenever tp > 1,
// along the sequence only with sequence parallelism, or never.
enum class TensorSplit : std::uint8_t { heads, sequence, whole };
struct SavedTensor {
    std::string_view name{};  // "x", "n1", "q", ..., as train/model.cpp LlamaLayer names them
    std::uint64_t bytes = 0;  // on one rank
    TensorSplit split = TensorSplit::whole;
};
// What one layer keeps with no recompute, tensor by tensor, on one rank; the sum is ActivationSizes::kept_none.
struct LayerSavedTensors {
    std::array<SavedTensor, 16> tensors{};
    std::size_t count = 0;
    std::span<const SavedTensor> view() const { return {tensors.data(), count}; }
};
LayerSavedTensors layer_saved_tensors(const ModelSpec& m, const TrialConfig& c);

// The persistent backend scratch (§6): the largest workspace any op of the step asks for.
std::uint64_t workspace_bytes(const ModelSpec& m, const TrialConfig& c, const Hardware& hw, const EstimateOptions& o);

// Bytes outside our allocator: CUDA context and libraries; 0 on the CPU backend.
std::uint64_t overhead_bytes(const Hardware& hw, const EstimateOptions& o);

struct StepMemory {
    std::array<ComponentBytes, kPhaseCount> phases{};  // indexed by Phase: the device's ledger
    // The host's ledger: the persistent buffers offload places there (core/offload_plan.h), the
    // same in every phase; all zero without offload.
    ComponentBytes host{};
    Phase peak_phase = Phase::forward;
    std::uint64_t peak = 0;

    const ComponentBytes& at(Phase p) const { return phases[static_cast<std::size_t>(p)]; }
    const ComponentBytes& at_peak() const { return at(peak_phase); }
};

// Every phase's components; `m` is the model (normally c.model). One rank of pipeline stage `stage`; the
// first stage (everything, without pipeline parallelism) where none is named.
StepMemory step_memory(const ModelSpec& m, const TrialConfig& c, const Hardware& hw, const EstimateOptions& o);
StepMemory step_memory(const ModelSpec& m, const TrialConfig& c, const Hardware& hw, const EstimateOptions& o,
                       const PipelineStage& stage);

// The components at the peak, as recorded beside measurements.
MemoryBreakdown breakdown_at_peak(const StepMemory& s);
// The host ledger as a breakdown: its peak is its total, reached when the trainer allocates it ("init").
MemoryBreakdown host_breakdown(const StepMemory& s);

}  // namespace tune
