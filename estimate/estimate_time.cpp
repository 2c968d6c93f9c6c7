#include "estimate/estimate_time.h"

#include <algorithm>
#include <cmath>

#include "core/offload_plan.h"
#include "core/parallel_plan.h"
#include "core/pipeline_schedule.h"
#include "core/pipeline_stages.h"
#include "core/zero_plan.h"
#include "estimate/collective_calls.h"
#include "estimate/flat_layout.h"
#include "estimate/gemm_calls.h"
#include "estimate/model_flops.h"
#include "estimate/recompute.h"
#include "estimate/tensor_parallel_calls.h"

namespace tune {
namespace {

struct Flops {
    double model = 0;  // per token, forward + backward
    double total = 0;  // per token, with recomputation
};

// Per token: the model FLOPs (estimate/model_flops.h), then what the engine
// computes again. Full checkpointing recomputes each layer's forward but its
// last GEMM (the down projection and its adapter's B product: the layer
// output is not needed again; train/model.cpp); selective-op the linears
// whose outputs it does not keep (Linear::op_recomputed). Flash attention recomputes
// the scores q k^T in backward: once on the GPU (FlashAttention-2's order);
// three times the half-square on the CPU, whose two backward passes (dK dV
// by key tile, dQ by query tile) each recompute the scores and the second
// recomputes dP (kernels/cpu/cpu_flash_attention.cpp).
Flops flops_per_token(const ModelSpec& m, const TrialConfig& c, const Hardware& hw) {
    const bool flash = c.attention == Attention::flash;
    const double q = static_cast<double>(m.q_dim());  // the scores' inner dimension: heads x head_dim
    const double layers = static_cast<double>(m.layers), s = static_cast<double>(c.context);
    const double attention = attention_forward_flops(m, c);
    double layer_recompute = 0, op_recompute = 0;
    for (const Linear& l : layer_linears(m, c)) {
        const double forward = linear_flops(l, c.adapters()).forward;
        layer_recompute += l.down ? 2 * l.rank * l.in : forward;  // down: only x A^T, for dB
        if (l.op_recomputed) op_recompute += forward;
    }

    Flops out;
    out.model = model_flops_per_token(m, c);
    const Recomputed again = recomputed(c.checkpointing);
    double recompute = 0;
    if (again.linears) recompute += layers * layer_recompute;
    if (again.op_linears) recompute += layers * op_recompute;
    // Selective recomputes the whole eager attention forward (scores, softmax
    // and P v: train/model.cpp LlamaLayer::recompute), not only the scores;
    // with flash it keeps everything (the lse is O(s)) and recomputes nothing.
    if (again.attention && !(c.checkpointing == Checkpointing::selective && flash)) recompute += layers * attention;
    if (flash) recompute += layers * (hw.backend == BackendKind::cpu ? 3.0 : 1.0) * s * q;
    out.total = out.model + recompute;
    // LOMO finds the global norm (for clipping or fp16 overflow) in a first pass over the
    // micro-batch: forward, recompute and backward all run twice (train/trainer.cpp).
    out.total *= lomo_backward_passes(c);
    return out;
}

// Bytes each rank sends per step: the step's collective calls
// (estimate/collective_calls.h, the one copy of the trainer's schedule), each
// at its ring factor: an all-reduce moves 2(N-1)/N of the buffer, a
// reduce-scatter or all-gather (N-1)/N.
double comm_bytes_per_step(const std::vector<CollectiveCall>& calls, const TrialConfig& c) {
    double bytes = 0;
    for (const CollectiveCall& call : calls)
        bytes += call.count * call.bytes * bus_factor(call.op, parallel_plan(c).dp);
    return bytes;
}

// Bytes the optimizer reads and writes per element it updates.
double optimizer_traffic_per_element(const TrialConfig& c) {
    const double wb = weight_bytes(c.precision), sb = state_bytes(c.precision);
    const double weights = has_master_weights(c.precision) ? 8 + wb : 2 * wb;
    switch (c.optimizer) {
        case Optimizer::adamw:
            return wb + weights + 4 * sb;
        case Optimizer::lion:
            return wb + weights + 2 * sb;
        case Optimizer::adam8bit:
            return wb + weights + 4;
        case Optimizer::adafactor:
            return 3 * wb + weights;  // statistics, RMS and apply passes
        case Optimizer::lomo:
            return wb + weights;
    }
    return wb + weights;
}

double owned_elements(const ModelSpec& m, const TrialConfig& c) {
    const std::uint64_t n = parallel_plan(c).dp;
    const FlatLayout layout = flat_layout(m, c.adam8bit_block);
    const bool sharded = zero_plan(c.zero_stage).updates_own_shard_only();
    auto part = [&](std::uint64_t numel) {
        return sharded ? shard_numel(numel, n, layout.align) : full_numel(numel, n, layout.align);
    };
    if (c.adapters())
        return static_cast<double>(m.layers *
                                   part(adapter_buffer(m, c.lora_rank, c.lora_targets, c.adam8bit_block).numel));
    return static_cast<double>(m.layers * part(layout.layer.numel) + part(layout.outer.numel));
}

// Bytes per token that materialized attention moves through memory: per
// layer, heads * s elements of the (H, S, S) matrices per token, each
// touched as fp32 scores (write, read) and probabilities in the storage
// dtype (write, read for P v) forward, and as fp32 dP (write, read), P
// (read twice) and dS (write, read twice) backward; recomputing the forward
// (selective or full checkpointing) touches the forward's again. The GEMMs
// are counted in FLOPs; this is the traffic of the softmax passes around
// them, which the FLOP count misses and which grows with s^2.
double attention_bytes_per_token(const ModelSpec& m, const TrialConfig& c, bool fused) {
    if (fused) return 0.0;
    const double ab = weight_bytes(c.precision);
    const double forward = 8 + 2 * ab, backward = 8 + 5 * ab;
    const double recompute = recomputed(c.checkpointing).attention ? forward : 0.0;
    return static_cast<double>(m.layers) * static_cast<double>(m.heads) * c.context * (forward + backward + recompute);
}

// QLoRA (§9): how many times one micro-batch dequantizes a layer's NF4
// matrices, in whole layers, over all layers: before each GEMM that reads a base
// weight (train/model.cpp LlamaLayer::weight), i.e. the forward and the
// backward's dX, and with full checkpointing the recompute, which skips the
// down projection; LOMO's norm pass runs them all again. 0 without qlora.
// A layer's base weights in its matrices, all of them and the down projection's.
struct LayerMatrices {
    double all = 0, down = 0, op_recomputed = 0;
};
LayerMatrices layer_matrices(const ModelSpec& m, const TrialConfig& c) {
    LayerMatrices out;
    for (const Linear& l : layer_linears(m, c)) {
        out.all += l.in * l.out;
        if (l.down) out.down += l.in * l.out;
        if (l.op_recomputed) out.op_recomputed += l.in * l.out;
    }
    return out;
}

double dequantized_layers_per_micro_batch(const ModelSpec& m, const TrialConfig& c) {
    if (c.method != Method::qlora) return 0.0;
    const LayerMatrices w = layer_matrices(m, c);
    const Recomputed again = recomputed(c.checkpointing);
    double recompute = 0.0;
    if (again.linears) recompute += 1.0 - w.down / w.all;
    if (again.op_linears) recompute += w.op_recomputed / w.all;
    return static_cast<double>(m.layers) * (2.0 + recompute) * lomo_backward_passes(c);
}

// Bytes one dequantization of a layer moves: read 4.127 bits per weight, write the compute dtype.
double dequantize_bytes_per_layer(const ModelSpec& m, const TrialConfig& c) {
    return layer_matrices(m, c).all * (4.127 / 8 + weight_bytes(c.precision));
}

double link_bandwidth(const Hardware& hw, std::uint32_t ranks) {
    return ranks <= hw.gpus_per_node ? hw.intra_node_bytes_per_s : hw.inter_node_bytes_per_s;
}

double safe_div(double a, double b) { return b > 0 ? a / b : 0.0; }

// The device's published training efficiency (Hardware::training_efficiency) in place of
// EstimateOptions' nominal one, for 16-bit steps (fp32 runs off the tensor cores). Calibration
// learns the measured step over this estimate, so its factor multiplies the prior, and probed
// rates, which measured the device itself, leave it out (apply_probed_rates).
double device_prior(const Hardware& hw, const TrialConfig& c) {
    if (!(hw.training_efficiency > 0) || c.precision == Precision::fp32) return 1.0;
    return hw.training_efficiency / EstimateOptions{}.compute_efficiency;
}

// What calibration learned of this configuration's dimensions (EstimateOptions):
// the product of its precision's, optimizer's, checkpointing's, ZeRO stage's and
// offload's factors, and its micro-batch size's.
double dimension_efficiency(const TrialConfig& c, const EstimateOptions& o) {
    const double tokens = static_cast<double>(c.micro_batch) * static_cast<double>(c.context);
    const double size = o.size_exponent == 0 || !(o.size_reference_tokens > 0)
                            ? 1.0
                            : std::pow(tokens / o.size_reference_tokens, o.size_exponent);
    return size * o.precision_efficiency[static_cast<std::size_t>(c.precision)] *
           o.optimizer_efficiency[static_cast<std::size_t>(c.optimizer)] *
           o.checkpointing_efficiency[static_cast<std::size_t>(c.checkpointing)] *
           o.zero_efficiency[std::min<std::size_t>(c.zero_stage, o.zero_efficiency.size() - 1)] *
           o.offload_efficiency[static_cast<std::size_t>(c.offload)];
}

// With probed rates (estimate/probed_rates.h): one micro-batch's GEMMs each at
// the rate measured for its shape and dtype, attention at its measured times,
// in seconds; the same passes as flops_per_token counts (forward, backward's
// dX and dW at their own layouts, recomputation, LOMO's norm pass). nullopt
// when a rate is missing.
struct ProbedMicroBatch {
    double gemm_s = 0;
    double attention_s = 0;
    double elementwise_s = 0;
};
std::optional<ProbedMicroBatch> probed_micro_batch(const ModelSpec& m, const TrialConfig& c, const ProbedRates& p,
                                                   bool fused, bool widening_backend) {
    const auto t = static_cast<std::int64_t>(c.micro_batch) * c.context;
    const ProbeDtype dtype = probe_dtype(c.precision);
    bool missing = false;
    // Each call at the rate probed for its shape, pass and output (estimate/gemm_calls.h).
    const auto seconds = [&](const std::vector<GemmCall>& calls) {
        double s = 0;
        for (const GemmCall& g : calls) {
            if (g.m * g.n * g.k == 0) continue;
            const std::optional<double> rate = p.gemm_flops_per_s(g.m, g.n, g.k, dtype, g.pass, g.output);
            if (!rate) missing = true;
            s += rate ? g.flops() / *rate : 0.0;
        }
        return s;
    };
    const bool frozen = c.adapters();
    double layer = 0, recompute_layer = 0, op_recompute_layer = 0;
    for (const LinearGemmCalls& calls : layer_gemm_calls(m, c, t, widening_backend)) {
        layer += seconds(calls.forward) + seconds(calls.backward);
        recompute_layer += seconds(calls.recompute);
        if (calls.op_recomputed) op_recompute_layer += seconds(calls.forward);
    }
    const LinearGemmCalls head_calls = head_gemm_calls(m, t, dtype != ProbeDtype::f32, frozen);
    const double head = seconds(head_calls.forward) + seconds(head_calls.backward);
    const std::optional<AttentionRate> a = p.attention_at(c.micro_batch, c.context, static_cast<std::int64_t>(m.heads),
                                                          static_cast<std::int64_t>(m.head_dim()), dtype, fused);
    const std::optional<ElementwiseRate> e = p.elementwise_at(t, dtype);
    if (missing || !a) return std::nullopt;
    const double layers = static_cast<double>(m.layers);
    const double step = layers * layer + head;
    const Recomputed again = recomputed(c.checkpointing);
    double recompute = 0, attention_recompute = 0;
    if (again.linears) recompute += layers * recompute_layer;
    if (again.op_linears) recompute += layers * op_recompute_layer;
    if (again.attention) attention_recompute = layers * a->forward_s;
    ProbedMicroBatch out;
    out.gemm_s = step + recompute;
    out.attention_s = layers * (a->forward_s + a->backward_s) + attention_recompute;
    // Each layer's element-wise ops forward and backward (full checkpointing: forward
    // again; selective-op too, counted whole: it reruns both norms, SwiGLU and all the
    // RoPE but q's), the embedding's, final norm's and cross-entropy's once.
    if (e) {
        const double forward_passes = again.elementwise ? 2.0 : 1.0;
        out.elementwise_s = layers * (forward_passes * e->layer_forward_s + e->layer_backward_s) + e->outer_s;
    }
    // LOMO's norm pass is a whole micro-batch of its own (train/trainer.cpp lomo_step:
    // forward, recompute and backward, the gradients measured instead of applied).
    const double lomo_passes = lomo_backward_passes(c);
    out.gemm_s *= lomo_passes;
    out.attention_s *= lomo_passes;
    out.elementwise_s *= lomo_passes;
    return out;
}

}  // namespace

namespace {

// Of a step's compute, backward's share: its FLOPs are twice forward's.
double backward_share(double compute_s) { return compute_s * 2.0 / 3.0; }

// Of the step's collectives (serial_s, one after another), what still shows
// where a stack overlaps a fraction of them (EstimateOptions::comm_overlap): a
// call hides only behind the compute it runs beside, and what outlasts that
// compute shows. At ZeRO-0 DDP's all-reduce runs beside the step's last
// backward alone: the other micro-batches run under no_sync (transformers'
// Trainer through accelerate's Accelerator.accumulate). At stages 1-3 the
// gathers and reduce-scatters run beside every micro-batch's forward and
// backward (FSDP's prefetch, DeepSpeed's overlap_comm).
double exposed_comm_seconds(double serial_s, const TrialConfig& c, const StepTime& t, double overlap) {
    const double compute = t.compute_s + t.attention_s;
    const double window = c.zero_stage == 0 ? backward_share(compute / std::max(1u, c.grad_accum)) : compute;
    return serial_s - overlap * std::min(serial_s, window);
}

// The step's collectives at their probed times (estimate/collective_calls.h):
// each call at its op's time for its size, latency included. nullopt when an
// op the step calls was not probed at this world size.
std::optional<double> probed_collective_seconds(const std::vector<CollectiveCall>& calls, const TrialConfig& c,
                                                const ProbedRates& p) {
    double total = 0;
    for (const CollectiveCall& call : calls) {
        const std::optional<double> s =
            p.collective_seconds(call.op, parallel_plan(c).dp, call.bytes, probe_dtype(c.precision));
        if (!s) return std::nullopt;
        total += call.count * *s;
    }
    return total;
}

// Stages 2-3: the add of each gradient bucket's slice into the rank's shard,
// around its reduce-scatter (CollectiveCall::bucket); 0 when not probed.
// Offload on a GPU: the slices cross to the host shard on the side stream
// while the next buffer's backward runs (train/trainer.cpp BucketSink), so
// what shows is what outlasts backward, and at least each micro-batch's last
// slice (the embedding's, or under adapters the first layer's), which no
// backward follows. On the CPU the side work runs in line: all of it shows.
double probed_bucket_seconds(const std::vector<CollectiveCall>& calls, const TrialConfig& c, const Hardware& hw,
                             const ProbedRates& p, double backward_s) {
    const bool host = offload_plan(c.offload).on_host(Component::grads);
    double total = 0, last = 0;
    for (const CollectiveCall& call : calls) {
        if (!call.bucket) continue;
        const double one =
            p.bucket_seconds(parallel_plan(c).dp, call.bytes, probe_dtype(c.precision), host).value_or(0.0);
        total += call.count * one;
        last = one;  // the outer buffer's call comes after the layers' (estimate/collective_calls.cpp)
    }
    if (!host || hw.backend == BackendKind::cpu) return total;
    return std::max(total - backward_s, c.grad_accum * last);
}

// Compute and attention from the probed rates; the optimizer's update at its
// own probed time per element; collectives call by call at their probed times.
// Each divided by how far the (calibrated) efficiencies moved from their
// defaults: calibration learns a step's measured time over its estimate, the
// whole step's, so what it learns scales every probed term alike (scaling some
// would leave the step short of what was learned). Terms without a probe stay nominal.
void apply_probed_rates(const ModelSpec& m, const TrialConfig& c, const Hardware& hw,
                        const std::vector<CollectiveCall>& calls, const EstimateOptions& o, StepTime& t) {
    const ProbedRates& p = *o.probed;
    const double speed = o.compute_efficiency / EstimateOptions{}.compute_efficiency * dimension_efficiency(c, o);
    if (!(speed > 0)) return;
    if (const auto micro =
            probed_micro_batch(m, c, p, c.attention == Attention::flash, hw.backend == BackendKind::cpu)) {
        t.compute_s = micro->gemm_s * c.grad_accum / speed;
        t.attention_s = micro->attention_s * c.grad_accum / speed;
        t.bucket_s = probed_bucket_seconds(calls, c, hw, p, backward_share(micro->gemm_s * c.grad_accum)) / speed;
        t.elementwise_s = micro->elementwise_s * c.grad_accum / speed + t.bucket_s;
    }
    // The rank's owned elements (its shard at ZeRO 1-3) at its optimizer's probed time per element.
    if (const auto per_element = p.optimizer_seconds_per_element(m, c))
        t.optimizer_s = *per_element * owned_elements(m, c) / speed;
    if (c.method == Method::qlora)
        if (const auto layer_s = p.dequantize_layer_seconds(m, probe_dtype(c.precision)))
            t.dequantize_s = dequantized_layers_per_micro_batch(m, c) * c.grad_accum * *layer_s / speed;
    if (t.comm_bytes > 0)
        if (const auto seconds = probed_collective_seconds(calls, c, p))
            t.comm_s = *seconds / speed;  // serial: step_time hides what the stack overlaps
}

// Offload on a GPU (core/offload_plan.h). tune's engine runs its parts in order on
// its stream: each micro-batch's gradient shards device to host, the CPU's
// update, the master's copy back, and each use's parameter shards host to
// device. With offload_overlap, as DeepSpeed's ZeRO-Offload schedules it
// (stage_1_and_2.py): the gradient shards go while backward runs
// (overlap_comm), so only what outlasts backward shows; the CPU's update and
// the updated 16-bit shard's copy back run tile by tile together (cpu_adam's
// ds_adam_step_plus_copy), so the slower one shows; parameter shards cross the
// link behind the compute they precede.
// The update takes the host's probed time per element (the CPU backend's kernels
// on every core), else streams optimizer_traffic_per_element through the
// preset's host memory bandwidth; either way the node's ranks share it. On the
// CPU backend host and device are one memory: nothing crosses a link and the
// update costs what it costs on the device. Where the buckets were probed with
// their shard in host memory (BucketRate::host), the element-wise term already
// holds the transfer as tune's engine makes it, the part of it the side stream
// leaves exposed (probed_bucket_seconds). The link's rate is the probed one
// (HostLinkRate) where there is one, else the preset's.
void apply_offload(const ModelSpec& model, const ModelSpec& m, const TrialConfig& c, const Hardware& hw,
                   const EstimateOptions& o, StepTime& t) {
    const OffloadPlan plan = offload_plan(c.offload);
    if (!plan.any() || hw.backend == BackendKind::cpu) return;
    const double owned = owned_elements(m, c);
    const double shard_bytes = owned * weight_bytes(c.precision);
    const double backward_s = backward_share(t.compute_s);
    const double link = (o.probed ? o.probed->host_link_bytes_per_s(offload_shard_bytes(model, c)) : std::nullopt)
                            .value_or(hw.host_link_bytes_per_s);
    const double d2h_s = t.bucket_s > 0 ? 0.0 : safe_div(c.grad_accum * shard_bytes, link);
    const std::optional<double> probed = o.probed ? o.probed->host_optimizer_seconds_per_element(m, c) : std::nullopt;
    const double per_element = probed.value_or(safe_div(optimizer_traffic_per_element(c), hw.host_memory_bytes_per_s));
    const double update_s = per_element * owned * ranks_per_node(c, o);
    const double h2d_s = safe_div(shard_bytes, link);
    double params_s = 0;
    if (plan.params_on_host) {
        const double uses = 2.0 + (c.checkpointing == Checkpointing::none ? 0.0 : 1.0);  // forward, backward, recompute
        params_s = safe_div(uses * c.grad_accum * shard_bytes, link);
    }
    t.optimizer_s = 0;  // the device updates nothing
    if (o.offload_overlap)
        t.offload_s =
            std::max(0.0, d2h_s - backward_s) + std::max(update_s, h2d_s) + std::max(0.0, params_s - t.compute_s);
    else  // the device casts the fp32 master it reads across the link (none with the weights on the host)
        t.offload_s = d2h_s + update_s + (plan.params_on_host ? 0.0 : safe_div(owned * 4.0, link)) + params_s;
    // What calibration learned of the configuration's dimensions scales this term as it does the probed ones.
    if (const double speed = dimension_efficiency(c, o); speed > 0) t.offload_s /= speed;
}

}  // namespace

double offload_shard_bytes(const ModelSpec& m, const TrialConfig& c) {
    return collective_message_bytes(m, c) / parallel_plan(c).dp;
}

double collective_message_bytes(const ModelSpec& model, const TrialConfig& c) {
    const ModelSpec m = parallel_plan(c).local(model);
    const FlatLayout layout = flat_layout(m, c.adam8bit_block);
    const BufferKind buffer =
        c.adapters() ? adapter_buffer(m, c.lora_rank, c.lora_targets, c.adam8bit_block) : layout.layer;
    const std::uint64_t n = parallel_plan(c).dp;
    return static_cast<double>(full_numel(buffer.numel, n, layout.align)) * weight_bytes(c.precision);
}

// The tensor-parallel group's collectives (estimate/tensor_parallel_calls.h), on the step's critical
// path: each at its probed time where the group's size was probed, else its bytes over the node's link.
double tensor_parallel_seconds(const std::vector<TensorParallelCall>& calls, const TrialConfig& c, const Hardware& hw,
                               const EstimateOptions& o) {
    double nominal = 0, probed = 0;
    bool all_probed = o.probed != nullptr;
    for (const TensorParallelCall& call : calls) {
        nominal += call.count * call.bytes * bus_factor(call.op, call.ranks);
        if (!all_probed) continue;
        const std::optional<double> s =
            o.probed->collective_seconds(call.op, call.ranks, call.bytes, probe_dtype(c.precision));
        all_probed = s.has_value();
        probed += s ? call.count * *s : 0.0;
    }
    return all_probed ? probed : safe_div(nominal, hw.intra_node_bytes_per_s * o.comm_efficiency);
}

// Pipeline parallelism: the micro-batches' work (what one rank holding every layer would spend on them)
// divides by FLOPs into the layers' and the LM head's, each virtual stage takes its layers' share and the
// last the head's, forward a third and backward two, and the schedule's table is timed with a hop of each
// boundary's activations, b s h (/ tp with sequence parallelism) in the weights' dtype, over the link
// between the stages (core/pipeline_schedule.h: the bubble comes from the table). The states' work (the
// data-parallel reduction, the update, offload) is the largest stage's share of the parameters.
double head_share(const ModelSpec& m, const TrialConfig& c, const Flops& flops) {
    const double head = 2.0 * static_cast<double>(m.hidden) * static_cast<double>(m.vocab) * (c.adapters() ? 2 : 3);
    return std::min(1.0, safe_div(head, flops.total));
}

void apply_pipeline(const ModelSpec& m, const TrialConfig& c, const Hardware& hw, const Flops& flops, StepTime& t) {
    const ParallelPlan plan = parallel_plan(c);
    const std::vector<PipelineStage> stages = pipeline_stages(m, c);
    if (plan.pp == 1 || stages.size() != plan.pp) return;
    const double work =
        (t.compute_s + t.attention_s + t.dequantize_s + t.elementwise_s + t.tensor_comm_s) / std::max(1u, c.grad_accum);
    const double head = work * head_share(m, c, flops);
    const double per_layer = (work - head) / static_cast<double>(std::max<std::uint64_t>(m.layers, 1));
    const std::size_t chunks = std::size_t{plan.pp} * plan.virtual_stages;
    std::vector<double> forward(chunks), backward(chunks);
    std::uint32_t most_layers = 0;
    for (const PipelineStage& stage : stages) {
        most_layers = std::max(most_layers, stage.layers);
        for (std::uint32_t chunk = 0; chunk < plan.virtual_stages; ++chunk) {
            const std::size_t g = std::size_t{chunk} * plan.pp + stage.stage;
            const double busy = stage.chunk_layers[chunk] * per_layer + (g + 1 == chunks ? head : 0.0);
            forward[g] = busy - backward_share(busy), backward[g] = backward_share(busy);
        }
    }
    const double boundary = static_cast<double>(plan.sequence_tokens(std::uint64_t{c.micro_batch} * c.context)) *
                            static_cast<double>(m.hidden) * weight_bytes(c.precision);
    const std::uint32_t stage_ranks = plan.dp * plan.tp * plan.cp;
    t.pipeline_hop_s = safe_div(boundary, link_bandwidth(hw, 2 * stage_ranks));
    const PipelineTable table = pipeline_table(c.pipeline_schedule, plan.pp, plan.virtual_stages, c.grad_accum);
    const PipelineTiming timed = time_pipeline(table, forward, backward, t.pipeline_hop_s);
    t.pipeline_s = timed.makespan_s;
    t.bubble_fraction = timed.bubble_fraction;
    t.stage_share = static_cast<double>(most_layers) / static_cast<double>(std::max<std::uint64_t>(m.layers, 1));
}

StepTime step_time(const ModelSpec& model, const TrialConfig& c, const Hardware& hw, const EstimateOptions& o) {
    const ModelSpec m = parallel_plan(c).local(model);  // what one rank computes
    const Flops flops = flops_per_token(m, c, hw);
    const double peak = c.precision == Precision::fp32 ? hw.peak_flops_fp32 : hw.peak_flops_half;
    const double replicas = parallel_plan(c).dp, ranks = std::max<std::uint32_t>(parallel_plan(c).world(), 1);
    const double tokens_per_rank = static_cast<double>(c.micro_batch) * c.context * c.grad_accum;

    StepTime t;
    t.model_flops_per_token = model_flops_per_token(model, c);  // MFU counts the whole model's
    t.flops_per_token = flops.total;
    const std::vector<CollectiveCall> calls = collective_calls(model, c);
    const std::vector<TensorParallelCall> tensor_calls = tensor_parallel_calls(model, c);
    t.comm_bytes = comm_bytes_per_step(calls, c) + tensor_parallel_bytes(tensor_calls);
    const double efficiency = std::min(1.0, o.compute_efficiency * dimension_efficiency(c, o) * device_prior(hw, c));
    t.compute_s = safe_div(flops.total * tokens_per_rank, peak * efficiency);
    t.comm_s =
        safe_div(comm_bytes_per_step(calls, c), link_bandwidth(hw, parallel_plan(c).world()) * o.comm_efficiency);
    t.optimizer_s = safe_div(optimizer_traffic_per_element(c) * owned_elements(m, c), hw.hbm_bytes_per_s);
    t.attention_s = safe_div(attention_bytes_per_token(m, c, c.attention == Attention::flash) * tokens_per_rank,
                             hw.hbm_bytes_per_s);
    t.dequantize_s = safe_div(
        dequantized_layers_per_micro_batch(m, c) * dequantize_bytes_per_layer(m, c) * c.grad_accum, hw.hbm_bytes_per_s);
    if (o.probed) apply_probed_rates(m, c, hw, calls, o, t);
    t.comm_s = exposed_comm_seconds(t.comm_s, c, t, o.comm_overlap[c.zero_stage]);
    apply_offload(model, m, c, hw, o, t);
    t.tensor_comm_s = tensor_parallel_seconds(tensor_calls, c, hw, o);
    // What shows of each part adds up: our engine overlaps nothing (comm_overlap 0).
    t.step_s = t.compute_s + t.comm_s + t.optimizer_s + t.attention_s + t.dequantize_s + t.elementwise_s + t.offload_s +
               t.tensor_comm_s;
    apply_pipeline(m, c, hw, flops, t);
    if (t.pipeline_s > 0) t.step_s = t.pipeline_s + t.stage_share * (t.comm_s + t.optimizer_s + t.offload_s);
    // Tokens: each replica's; the tensor-parallel ranks of a replica share them.
    t.tokens_per_s = safe_div(tokens_per_rank * replicas, t.step_s);
    t.mfu = safe_div(t.model_flops_per_token * t.tokens_per_s, peak * ranks);
    return t;
}

}  // namespace tune
