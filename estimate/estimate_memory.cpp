#include "estimate/estimate_memory.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "core/offload_plan.h"
#include "core/parallel_plan.h"
#include "core/peft_modules.h"
#include "core/pipeline_stages.h"
#include "estimate/flat_layout.h"
#include "estimate/model_states.h"
#include "kernels/workspace_bytes.h"

namespace tune {
namespace {

constexpr std::uint64_t kLogitsPerChunk = std::uint64_t{1} << 24;  // fp32 logits alive at once, at most
constexpr std::uint64_t kBufferAlign = 256;                        // bytes, kernels/lm_head_loss.cpp

std::uint64_t aligned(std::uint64_t bytes) { return round_up(bytes, kBufferAlign); }

bool cpu_backend(const Hardware& hw) { return hw.backend == BackendKind::cpu; }

// Activation bytes a layer keeps after its forward under each Checkpointing mode.
std::uint64_t kept_bytes(const ActivationSizes& a, Checkpointing mode, bool fused) {
    switch (mode) {
        case Checkpointing::none:
            return a.kept_none;
        case Checkpointing::selective:
            return fused ? a.kept_none : a.kept_none - a.probs;
        case Checkpointing::full:
            return a.hidden;
        case Checkpointing::selective_op:
            return a.kept_none - a.op_dropped;
    }
    return a.kept_none;
}

// The LM head + loss workspace, as kernels/lm_head_loss.cpp asks for it:
// logits, the 16-bit logit gradient, and the largest GEMM workspace of the
// chunk (CPU: fp32 staging of 16-bit operands; CUDA: cuBLASLt's, any dtype).
std::uint64_t lm_head_bytes(std::uint64_t rows, std::uint64_t v, std::uint64_t h, std::uint64_t ab, bool cpu) {
    const std::uint64_t cells = rows * v;
    std::uint64_t bytes = aligned(4 * cells);
    if (ab != 4) bytes += aligned(ab * cells);
    if (!cpu)
        bytes += aligned(kernels::workspace::kCudaGemmBytes);
    else if (ab != 4)
        bytes += 4 * (cells + v * h + rows * h);
    return bytes;
}

// The transient comm buffers of one flat buffer (bucket for stages 2-3, gathered weights for stage 3).
std::uint64_t comm_bytes(std::uint64_t numel, const StateSettings& s, bool gathers_only) {
    const std::uint64_t full = full_numel(numel, s.shards, s.align);
    const std::uint64_t wb = weight_bytes(s.precision);
    const std::uint64_t bucket = !gathers_only && s.zero.reduce_scatters_during_backward() ? full * wb : 0;
    const std::uint64_t gathered = s.zero.gathers_weights_before_use() ? full * wb : 0;
    return bucket + gathered;
}

// Offload's buckets (train/trainer.cpp BucketSink): a bucket's slice crosses the link on the
// side stream while the next buffer's backward runs, and the bucket is freed at the next close,
// so each backward holds the previous bucket beside its own. The first layer's is the head's
// (none under adapters), a lower layer's the layer above's, which that layer's kept activations
// (a.kept, freed once its backward ends) no longer sit beside. The embedding's holds layer 0's.
bool holds_previous_bucket(const TrialConfig& c) { return offload_plan(c.offload).on_host(Component::grads); }

// The larger of two moments of one phase.
ComponentBytes larger(const ComponentBytes& a, const ComponentBytes& b) { return b.total() > a.total() ? b : a; }

// The overhead's part that follows the activations (EstimateOptions::overhead_per_activation_byte), then the peak.
StepMemory with_peak(StepMemory s, double overhead_per_activation_byte) {
    for (ComponentBytes& phase : s.phases)
        phase[Component::overhead] += static_cast<std::uint64_t>(
            std::llround(overhead_per_activation_byte * static_cast<double>(phase[Component::activations])));
    for (Phase p : kPhases) {
        const std::uint64_t t = s.at(p).total();
        if (t > s.peak) s.peak = t, s.peak_phase = p;
    }
    return s;
}

// One phase's components: the persistent buffers of `base`, then what the
// phase holds for the moment; LOMO's gradient of the tensor being applied
// (lomo_grad elements in the weights' dtype) counts with the gradients.
struct PhaseBytes {
    PhaseBytes(const ComponentBytes& base, const TrialConfig& c)
        : base(base), lomo(c.optimizer == Optimizer::lomo), grad_bytes(weight_bytes(c.precision)) {}

    ComponentBytes operator()(std::uint64_t activations, std::uint64_t logits, std::uint64_t comm,
                              std::uint64_t lomo_grad) const {
        ComponentBytes p = base;
        p[Component::activations] = activations;
        p[Component::logits] = logits;
        p[Component::comm] = comm;
        if (lomo) p[Component::grads] += lomo_grad * grad_bytes;
        return p;
    }

    const ComponentBytes& base;
    bool lomo;
    std::uint64_t grad_bytes;
};

// What one pipeline stage's micro-batch runs beside (docs/memory-model.md §12): the layers of the chunk it
// runs, what the other micro-batches in flight keep of theirs, and the stage's token buffers (the inputs
// the embedding keeps for its backward, the head's targets and losses). One stage holding everything,
// one micro-batch at a time, without pipeline parallelism.
struct StageView {
    std::uint64_t layers = 0;  // of the running chunk
    std::uint64_t others = 0;  // activation bytes the other micro-batches in flight keep
    std::uint64_t io = 0;
    bool embedding = true, head = true;

    static StageView of(const PipelineStage& stage, const ActivationSizes& a, const TrialConfig& c) {
        const std::uint64_t t = std::uint64_t{c.micro_batch} * c.context;
        const std::uint64_t chunk = stage.largest_chunk();
        const std::uint64_t io = 4 * t * stage.held_inputs + 8 * t * stage.held_targets;
        // The other micro-batches waiting for the head's backward keep its input, the last layer's output.
        const std::uint64_t heads = stage.held_targets > 1 ? (stage.held_targets - 1) * a.hidden : 0;
        return StageView{chunk, (stage.held_layers - chunk) * a.kept + heads, io, stage.embedding, stage.head};
    }
    std::uint64_t below() const { return layers > 0 ? layers - 1 : 0; }  // kept layers under the running one
};

// LoRA (§9): the frozen base gets no gradients, so the head has no bucket and
// no LOMO gradient, there is no embedding backward, and the layer's bucket,
// LOMO gradient and Adafactor sums are the adapters'. Stage 3 gathers the
// base layer (qlora: its NF4 storage) and its adapters.
StepMemory adapter_step(const ModelSpec& m, const TrialConfig& c, const FlatLayout& layout, const ComponentBytes& base,
                        const ActivationSizes& a, const StageView& v, double overhead_per_activation_byte) {
    const StateSettings settings = StateSettings::of(c);
    const BufferKind adapters = adapter_buffer(m, c.lora_rank, c.lora_targets, c.adam8bit_block);
    const bool lomo = c.optimizer == Optimizer::lomo;
    const std::uint64_t gb = weight_bytes(c.precision);
    const std::uint64_t below = v.below(), last = v.layers > 0 ? a.kept_none : 0;
    const PhaseBytes phase{base, c};
    const std::uint64_t gathered_base = c.method == Method::qlora ? nf4_gathered_layer_bytes(layout, settings)
                                                                  : comm_bytes(layout.layer.numel, settings, true);
    const std::uint64_t gathered_layer = gathered_base + comm_bytes(adapters.numel, settings, true);
    const std::uint64_t bucket =
        comm_bytes(adapters.numel, settings, lomo) - comm_bytes(adapters.numel, settings, true);
    const std::uint64_t layer_comm = gathered_layer + bucket;
    const std::uint64_t outer_gathered = comm_bytes(layout.outer.numel, settings, true);

    StepMemory s;
    s.phases[0] = phase(v.io + v.others + below * a.kept + last + a.hidden, 0, gathered_layer + a.gathered, 0);
    const std::uint64_t head = v.io + v.others + v.layers * a.kept + 3 * a.hidden + a.rstd;
    const ComponentBytes chunks = phase(head, a.logits, outer_gathered + 2 * a.gathered, 0);
    // + the norm's sink
    const ComponentBytes norm = phase(head + a.hidden + gb * m.hidden, 0, outer_gathered, 0);
    s.phases[1] = !v.head ? phase(0, 0, 0, 0) : norm.total() > chunks.total() ? norm : chunks;
    const std::uint64_t top = v.io + v.others + below * a.kept + last + a.hidden + a.scratch;
    s.phases[2] = phase(top, 0, layer_comm + a.gathered, adapters.max_tensor);
    if (holds_previous_bucket(c) && v.layers > 1)  // the head has no bucket to hold
        s.phases[2] =
            larger(s.phases[2], phase(top - a.kept, 0, layer_comm + bucket + a.gathered, adapters.max_tensor));
    s.phases[3] = phase(0, 0, 0, 0);  // no embedding backward: the phase holds the persistent buffers only
    const bool sums =
        c.optimizer == Optimizer::adafactor && settings.zero.updates_own_shard_only() && settings.shards > 1;
    s.phases[4] = phase(0, 0, sums ? 4 * adapters.sums : 0, 0);
    return with_peak(s, overhead_per_activation_byte);
}

}  // namespace

std::uint64_t logit_chunk_rows(std::uint64_t tokens, std::uint64_t vocab) {
    return std::min(tokens, std::max<std::uint64_t>(1, kLogitsPerChunk / std::max<std::uint64_t>(vocab, 1)));
}

LayerSavedTensors layer_saved_tensors(const ModelSpec& model, const TrialConfig& c) {
    const ParallelPlan tp = parallel_plan(c);
    const ModelSpec m = tp.local(model);
    const std::uint64_t b = c.micro_batch, s = c.context, t = b * s, ts = tp.sequence_tokens(t);
    const std::uint64_t h = m.hidden, q = m.q_dim(), kv = m.kv_dim(), f = m.ffn, heads = m.heads;
    const std::uint64_t ab = weight_bytes(c.precision);  // activations share the weights' dtype
    const bool flash = c.attention == Attention::flash;
    LayerSavedTensors out;
    const auto keep = [&](std::string_view name, std::uint64_t bytes, TensorSplit split) {
        out.tensors[out.count++] = SavedTensor{name, bytes, split};
    };
    keep("x", ab * ts * h, TensorSplit::sequence);  // the layer's input
    keep("rstd1", 4 * ts, TensorSplit::sequence);
    keep("n1", ab * ts * h, TensorSplit::sequence);  // attention's input, the first norm's output
    keep("q", ab * t * q, TensorSplit::heads);
    keep("k", ab * t * kv, TensorSplit::heads);
    keep("v", ab * t * kv, TensorSplit::heads);
    // Eager: the probabilities (b, heads, s, s); flash: the log-sum-exp (b, heads, s) in fp32.
    keep("attention", flash ? 4 * b * heads * s : ab * b * heads * s * s, TensorSplit::heads);
    keep("o", ab * t * q, TensorSplit::heads);  // the output projection's input
    keep("x2", ab * ts * h, TensorSplit::sequence);
    keep("rstd2", 4 * ts, TensorSplit::sequence);
    keep("n2", ab * ts * h, TensorSplit::sequence);  // the MLP's input
    keep("g", ab * t * f, TensorSplit::heads);
    keep("u", ab * t * f, TensorSplit::heads);
    keep("m", ab * t * f, TensorSplit::heads);  // silu(g) u, the down projection's input
    // q/k norms: the projections before the norm (T, q), (T, kv) and an fp32 rstd per head and token.
    if (m.qk_norm) keep("qk-norm", ab * t * (q + kv) + 4 * t * (heads + m.kv_heads), TensorSplit::heads);
    // §9: x A^T (T, r) of each adapted linear, kept for dB; A is whole on every rank.
    if (c.adapters()) keep("lora-xa", ab * t * c.lora_rank * lora_target_count(c.lora_targets), TensorSplit::whole);
    return out;
}

ActivationSizes activation_sizes(const ModelSpec& model, const TrialConfig& c, const Hardware& hw,
                                 const EstimateOptions&) {
    const ParallelPlan tp = parallel_plan(c);
    const ModelSpec m = tp.local(model);
    const std::uint64_t b = c.micro_batch, s = c.context, t = b * s, ts = tp.sequence_tokens(t);
    const std::uint64_t h = m.hidden, q = m.q_dim(), kv = m.kv_dim(), f = m.ffn, heads = m.heads;
    const std::uint64_t ab = weight_bytes(c.precision);  // activations share the weights' dtype

    ActivationSizes a;
    a.io = 12 * t;
    a.hidden = ab * ts * h;
    a.rstd = 4 * ts;
    // Sequence parallelism gathers a tensor-parallel region's input whole while the region runs.
    a.gathered = tp.sequence_parallel ? ab * t * h : 0;
    const bool flash = c.attention == Attention::flash;
    a.probs = flash ? 4 * b * heads * s : ab * b * heads * s * s;
    for (const SavedTensor& saved : layer_saved_tensors(model, c).view()) a.kept_none += saved.bytes;
    // selective-op frees n1, x2, n2, u, m, both rstd and, without q/k norms, k
    // (train/model.cpp LlamaLayer::drop).
    a.op_dropped = 3 * a.hidden + ab * t * (2 * f + (m.qk_norm ? 0 : kv)) + 2 * a.rstd;
    // The whole (T, h) input gradient of a tensor-parallel region, before its all-reduce (or reduce-scatter).
    a.scratch = ab * t * (h + std::max(3 * f, 2 * q + 2 * kv));
    // §9: in backward dy B (T, r) of one linear and the frozen norms' throwaway gradient (h).
    if (c.adapters()) a.scratch += ab * (t * c.lora_rank + h);
    a.kept = kept_bytes(a, c.checkpointing, flash);
    a.chunk_rows = logit_chunk_rows(t, m.vocab);
    a.logits = lm_head_bytes(a.chunk_rows, m.vocab, h, ab, cpu_backend(hw));
    // The parallel cross-entropy's per-row statistics over the vocabulary's ranks: max, sum of exponentials, target
    // logit.
    if (tp.tp > 1) a.logits += 3 * aligned(4 * a.chunk_rows);
    return a;
}

std::uint64_t workspace_bytes(const ModelSpec& model, const TrialConfig& c, const Hardware& hw,
                              const EstimateOptions& o) {
    const ModelSpec m = parallel_plan(c).local(model);
    const std::uint64_t s = c.context, t = std::uint64_t{c.micro_batch} * s;
    const std::uint64_t h = m.hidden, q = m.q_dim(), kv = m.kv_dim(), f = m.ffn, d = m.head_dim();
    const std::uint64_t ab = weight_bytes(c.precision);
    // The embedding backward's token lists, on every backend.
    const std::uint64_t embedding = kernels::workspace::embedding_backward_bytes(t, m.vocab);
    if (!cpu_backend(hw)) {
        // Eager attention's scratch for one batch element (with its GEMM
        // workspace, which every layer GEMM's cuBLASLt workspace fits inside);
        // fused attention's for cuDNN's graphs over the micro-batch.
        const std::uint64_t attention =
            c.attention == Attention::flash
                ? kernels::workspace::cuda_flash_attention_bytes(c.micro_batch, m.heads, s, d, ab)
                : kernels::workspace::cuda_attention_bytes(m.heads, s, ab);
        return std::max({attention, kernels::workspace::kCudaGemmBytes, embedding});
    }
    // Attention, per thread: eager two (s, s) and eight (s, d) fp32 blocks
    // (kernels/cpu/cpu_attention.cpp); flash tiles independent of s and two
    // (s, d) accumulators.
    const std::uint64_t threads = std::max<std::uint32_t>(o.cpu_threads, 1);
    const std::uint64_t attention = c.attention == Attention::flash
                                        ? kernels::workspace::cpu_flash_attention_bytes(threads, s, d)
                                        : kernels::workspace::cpu_eager_attention_bytes(threads, s, d);
    if (ab == 4) return std::max(attention, embedding);
    // 16-bit GEMMs widen A, B and C to fp32 (kernels/cpu/cpu_gemm.cpp), so no projections are fused here
    // (core/projection_fusion.h).
    const std::uint64_t gemm = std::max({t * h + t * q + q * h, t * h + t * kv + kv * h, t * h + t * f + f * h});
    return std::max({attention, 4 * gemm, embedding});
}

namespace {

// QLoRA (§9): the ops' scratch rounded to 256 bytes, then the largest weight
// matrix dequantized in the weights' dtype (each GEMM's weight in turn).
std::uint64_t qlora_workspace(std::uint64_t ops, const ModelSpec& m, const TrialConfig& c) {
    const std::uint64_t largest = std::max({m.q_dim() * m.hidden, m.kv_dim() * m.hidden, m.ffn * m.hidden});
    return round_up(ops, 256) + weight_bytes(c.precision) * largest;
}

// The persistent buffers offload keeps on the host leave the device's base for the host's ledger.
ComponentBytes take_offloaded(ComponentBytes& base, const OffloadPlan& plan) {
    ComponentBytes host{};
    for (Component k : kComponents)
        if (plan.on_host(k)) host[k] = std::exchange(base[k], 0);
    return host;
}

StepMemory with_host(StepMemory s, const ComponentBytes& host) {
    s.host = host;
    return s;
}

}  // namespace

std::uint64_t overhead_bytes(const Hardware& hw, const EstimateOptions& o) {
    // On the CPU: the process's baseline, when the trial or the driver measured it.
    if (cpu_backend(hw)) return o.overhead_bytes.value_or(0);
    if (o.overhead_bytes) return *o.overhead_bytes;
    // Measured by the sweep's probes on this device, else the device preset's.
    if (o.probed && o.probed->device_baseline_bytes) return *o.probed->device_baseline_bytes;
    return hw.runtime_overhead_bytes;
}

StepMemory step_memory(const ModelSpec& model, const TrialConfig& c, const Hardware& hw, const EstimateOptions& o) {
    return step_memory(model, c, hw, o, pipeline_stages(model, c).front());
}

StepMemory step_memory(const ModelSpec& model, const TrialConfig& c, const Hardware& hw, const EstimateOptions& o,
                       const PipelineStage& stage) {
    const ModelSpec m = stage_model(parallel_plan(c).local(model), stage);  // the rank's shard of its stage's matrices
    const FlatLayout layout = stage_flat_layout(parallel_plan(c).local(model), c, stage);
    const StateSettings settings = StateSettings::of(c);
    const ModelStateBytes states = trial_states(model, c, stage);
    const ActivationSizes a = activation_sizes(model, c, hw, o);
    const StageView v = StageView::of(stage, a, c);
    const bool lomo = c.optimizer == Optimizer::lomo;
    const std::uint64_t below = v.below();                      // kept layers under the running one
    const std::uint64_t last = v.layers > 0 ? a.kept_none : 0;  // the running layer, whole

    ComponentBytes base{};
    base[Component::params] = states.params;
    base[Component::master] = states.master;
    base[Component::grads] = states.grads;
    base[Component::optim] = states.optim;
    base[Component::workspace] = workspace_bytes(model, c, hw, o);
    if (c.method == Method::qlora) base[Component::workspace] = qlora_workspace(base[Component::workspace], m, c);
    // Biases: the (T) ones the bias GEMMs multiply by (train/trainer.cpp).
    if (m.layer_bias_params() > 0)
        base[Component::workspace] += weight_bytes(c.precision) * std::uint64_t{c.micro_batch} * c.context;
    base[Component::overhead] = overhead_bytes(hw, o);
    const ComponentBytes host = take_offloaded(base, offload_plan(c.offload));

    const PhaseBytes phase{base, c};
    if (c.adapters()) return with_host(adapter_step(m, c, layout, base, a, v, o.overhead_per_activation_byte), host);
    const std::uint64_t layer_comm = comm_bytes(layout.layer.numel, settings, lomo);
    const std::uint64_t outer_comm = comm_bytes(layout.outer.numel, settings, lomo);
    const std::uint64_t gathered_layer = comm_bytes(layout.layer.numel, settings, true);
    const std::uint64_t outer_bucket = outer_comm - comm_bytes(layout.outer.numel, settings, true);

    StepMemory s;
    s.phases[0] = phase(v.io + v.others + below * a.kept + last + a.hidden, 0, gathered_layer + a.gathered, 0);
    // Head: during the chunk loop (logits alive) or at the final-norm backward (dX alive).
    const std::uint64_t head = v.io + v.others + v.layers * a.kept + 3 * a.hidden + a.rstd;  // + xL, nf, dnf, rstd_f
    // LOMO with tied embeddings: the head begins the embedding's gradient and
    // the embedding backward ends it, so it is held through the layers.
    const std::uint64_t tied = lomo && m.tied_embeddings ? m.vocab * m.hidden : 0;
    // Sequence parallelism: the chunks read every token's nf and write every token's dnf (two gathered).
    const ComponentBytes chunks = phase(head, a.logits, outer_comm + 2 * a.gathered, layout.outer.max_tensor);
    const ComponentBytes norm = phase(head + a.hidden, 0, outer_comm, m.hidden + tied);
    s.phases[1] = !v.head ? phase(0, 0, 0, 0) : norm.total() > chunks.total() ? norm : chunks;
    const std::uint64_t top = v.io + v.others + below * a.kept + last + a.hidden + a.scratch;
    const std::uint64_t layer_bucket = layer_comm - gathered_layer;
    const bool previous = holds_previous_bucket(c);
    s.phases[2] =
        phase(top, 0, layer_comm + a.gathered + (previous ? outer_bucket : 0), layout.layer.max_tensor + tied);
    if (previous && v.layers > 1)
        s.phases[2] = larger(s.phases[2], phase(top - a.kept, 0, layer_comm + layer_bucket + a.gathered,
                                                layout.layer.max_tensor + tied));
    const std::uint64_t before_embedding = !previous ? 0 : v.layers > 0 ? layer_bucket : outer_bucket;
    s.phases[3] = !v.embedding ? phase(0, 0, 0, 0)
                               : phase(v.io + v.others + a.hidden, 0, outer_bucket + before_embedding + a.gathered,
                                       layout.outer.max_tensor);  // + every token's dx
    // Adafactor over shards completes its sums over ranks one buffer at a time.
    const bool sums =
        c.optimizer == Optimizer::adafactor && settings.zero.updates_own_shard_only() && settings.shards > 1;
    s.phases[4] = phase(0, 0, sums ? 4 * std::max(layout.layer.sums, layout.outer.sums) : 0, 0);

    return with_host(with_peak(s, o.overhead_per_activation_byte), host);
}

MemoryBreakdown breakdown_at_peak(const StepMemory& s) {
    MemoryBreakdown b;
    static_cast<ComponentBytes&>(b) = s.at_peak();
    b.peak = s.peak;
    b.peak_phase = to_string(s.peak_phase);
    return b;
}

MemoryBreakdown host_breakdown(const StepMemory& s) {
    MemoryBreakdown b;
    static_cast<ComponentBytes&>(b) = s.host;
    b.peak = s.host.total();
    if (b.peak > 0) b.peak_phase = "init";
    return b;
}

}  // namespace tune
