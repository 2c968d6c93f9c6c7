#include "search/estimate_time.h"

#include <algorithm>

#include "core/zero_plan.h"
#include "kernels/math/nf4.h"
#include "search/flat_layout.h"
#include "search/model_flops.h"

namespace tune {
namespace {

// LOMO runs a first backward pass for the global norm when it clips or when
// fp16 may overflow, then the applying pass.
double lomo_backward_passes(const TrialConfig& c) {
    return c.optimizer == Optimizer::lomo && (c.clip > 0 || c.precision == Precision::fp16_mixed) ? 2.0 : 1.0;
}

struct Flops {
    double model = 0;  // per token, forward + backward
    double total = 0;  // per token, with recomputation
};

// Per token: the model FLOPs (search/model_flops.h), then what the engine
// computes again. Full checkpointing recomputes each layer's forward but its
// last GEMM (the down projection and its adapter's B product: the layer
// output is not needed again; harness/model.cpp). Flash attention recomputes
// the scores q k^T in backward: once on the GPU (FlashAttention-2's order);
// three times the half-square on the CPU, whose two backward passes (dK dV
// by key tile, dQ by query tile) each recompute the scores and the second
// recomputes dP (kernels/cpu/cpu_flash_attention.cpp).
Flops flops_per_token(const ModelSpec& m, const TrialConfig& c, const Hardware& hw) {
    const bool flash = c.attention == Attention::flash;
    const double h = static_cast<double>(m.hidden), v = static_cast<double>(m.vocab);
    const double layers = static_cast<double>(m.layers), s = static_cast<double>(c.context);
    const double attention = attention_forward_flops(m, c);
    double layer_forward = 0, layer_recompute = 0;
    for (const Linear& l : layer_linears(m, c)) {
        const double forward = linear_flops(l, c.adapters()).forward;
        layer_forward += forward;
        layer_recompute += l.down ? 2 * l.rank * l.in : forward;  // down: only x A^T, for dB
    }
    const double forward = layers * (layer_forward + attention) + 2 * h * v;

    Flops out;
    out.model = model_flops_per_token(m, c);
    double recompute = 0;
    if (c.checkpointing == Checkpointing::full) recompute = layers * (layer_recompute + attention);
    // Selective recomputes the whole eager attention forward (scores, softmax
    // and P v: harness/model.cpp LlamaLayer::recompute), not only the scores;
    // with flash it keeps everything (the lse is O(s)) and recomputes nothing.
    if (c.checkpointing == Checkpointing::selective && !flash) recompute = layers * attention;
    if (flash) recompute += layers * (hw.backend == BackendKind::cpu ? 3.0 : 1.0) * s * h;
    out.total = out.model + recompute;
    // LOMO finds the global norm (for clipping or fp16 overflow) in a first backward pass.
    if (lomo_backward_passes(c) > 1) out.total += out.model - forward + recompute;
    return out;
}

// The gradient and weight collectives of a plan, in elements times ring * wb:
// gradients all-reduced (2x), reduce-scattered once, or per micro-batch
// through buckets; weights gathered once after the update or before every use.
double zero_plan_bytes(const ZeroPlan& z, double ring_wb, double all, double outer, double micro, double gathers) {
    double grads = 0;
    if (z.all_reduces_gradients()) grads = 2 * all;
    else if (z.reduce_scatters_after_backward()) grads = all;
    else grads = micro * (all + outer);
    double weights = 0;
    if (z.gathers_weights_after_update()) weights = all;
    else if (z.gathers_weights_before_use()) weights = gathers;
    return ring_wb * (grads + weights);
}

// What stage 3 gathers of one base layer, in elements of the weights' dtype:
// the padded layer, or with qlora its NF4 codes, absmax codes and scales
// over whole absmax groups per rank (the offset is every rank's already).
double base_layer_gathered(double layer, std::uint64_t ranks, const TrialConfig& c) {
    if (c.method != Method::qlora) return layer;
    const math::Nf4Sizes s =
        math::nf4_sizes(math::nf4_shard(static_cast<std::int64_t>(layer), static_cast<std::int64_t>(ranks)).padded);
    return static_cast<double>(s.packed + s.absmax + 4 * s.scales) / weight_bytes(c.precision);
}

// Bytes each rank sends per step, ring algorithms: an all-reduce moves
// 2(N-1)/N of the buffer, a reduce-scatter or all-gather (N-1)/N.
double comm_bytes_per_step(const ModelSpec& m, const TrialConfig& c) {
    const std::uint64_t n = std::max<std::uint32_t>(c.world_size, 1);
    if (n == 1) return 0;
    const ZeroPlan zero = zero_plan(c.zero_stage);
    const FlatLayout layout = flat_layout(m, c.adam8bit_block);
    const double ring = static_cast<double>(n - 1) / static_cast<double>(n);
    const double wb = weight_bytes(c.precision);
    double layer = static_cast<double>(full_numel(layout.layer.numel, n, layout.align));
    double outer = static_cast<double>(full_numel(layout.outer.numel, n, layout.align));
    const double micro = c.grad_accum;
    double gathers = micro * (2 * static_cast<double>(m.layers) * layer + 2 * outer);  // stage 3
    if (c.adapters()) {
        // §9: gradients and updates are the adapters'; stage 3 still gathers the base, every
        // buffer twice per micro-batch: the layers for forward and backward, the outer
        // buffer for the embedding and the head (qlora: the layers' NF4 storage).
        const BufferKind a = adapter_buffer(m, c.lora_rank, c.lora_targets, c.adam8bit_block);
        const double adapter = static_cast<double>(full_numel(a.numel, n, layout.align));
        const double base_layer = base_layer_gathered(layer, n, c);
        gathers = micro * (2 * static_cast<double>(m.layers) * (base_layer + adapter) + 2 * outer);
        layer = adapter;
        outer = 0;
    }
    const double all = static_cast<double>(m.layers) * layer + outer;

    if (c.optimizer == Optimizer::lomo) {
        // Each tensor's own gradient (unpadded) is all-reduced, once per
        // backward pass; stages 1-2 gather each buffer's new weights after
        // the applying pass (the outer buffer twice: after the head and
        // after the embedding); stage 3 gathers in every pass.
        const double passes = lomo_backward_passes(c);
        const double reduce = passes * 2 * ring * wb * (c.adapters() ? all : static_cast<double>(m.param_count()));
        if (zero.gathers_weights_after_update()) return reduce + ring * wb * (all + outer);
        if (zero.gathers_weights_before_use()) return reduce + passes * ring * wb * gathers;
        return reduce;
    }
    // Stages 1-3 complete the global norm with one scalar all-reduce;
    // Adafactor over shards its partial sums with two per buffer (§4 O).
    double small = 0;
    if (zero.updates_own_shard_only()) small += 2 * ring * 4;
    if (zero.updates_own_shard_only() && c.optimizer == Optimizer::adafactor) {
        const auto sums = [](const BufferKind& k) { return static_cast<double>(k.sums - k.tensors); };
        small += 2 * ring * 4 * (static_cast<double>(m.layers) * sums(layout.layer) + sums(layout.outer));
    }
    return small + zero_plan_bytes(zero, ring * wb, all, outer, micro, gathers);
}

// Bytes the optimizer reads and writes per element it updates.
double optimizer_traffic_per_element(const TrialConfig& c) {
    const double wb = weight_bytes(c.precision), sb = state_bytes(c.precision);
    const double weights = has_master_weights(c.precision) ? 8 + wb : 2 * wb;
    switch (c.optimizer) {
        case Optimizer::adamw: return wb + weights + 4 * sb;
        case Optimizer::lion: return wb + weights + 2 * sb;
        case Optimizer::adam8bit: return wb + weights + 4;
        case Optimizer::adafactor: return 3 * wb + weights;  // statistics, RMS and apply passes
        case Optimizer::lomo: return wb + weights;
    }
    return wb + weights;
}

double owned_elements(const ModelSpec& m, const TrialConfig& c) {
    const std::uint64_t n = std::max<std::uint32_t>(c.world_size, 1);
    const FlatLayout layout = flat_layout(m, c.adam8bit_block);
    const bool sharded = zero_plan(c.zero_stage).updates_own_shard_only();
    auto part = [&](std::uint64_t numel) {
        return sharded ? shard_numel(numel, n, layout.align) : full_numel(numel, n, layout.align);
    };
    if (c.adapters())
        return static_cast<double>(m.layers * part(adapter_buffer(m, c.lora_rank, c.lora_targets, c.adam8bit_block).numel));
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
    const double recompute = c.checkpointing == Checkpointing::none ? 0.0 : forward;
    return static_cast<double>(m.layers) * static_cast<double>(m.heads) * c.context * (forward + backward + recompute);
}

// QLoRA (§9): bytes each micro-batch moves dequantizing the layers' NF4
// weights: read 4.127 bits, write the compute dtype, once per GEMM that reads
// a weight: forward, the backward's dX and, with full checkpointing, the recompute.
double dequantize_bytes_per_micro_batch(const ModelSpec& m, const TrialConfig& c) {
    if (c.method != Method::qlora) return 0.0;
    const double h = static_cast<double>(m.hidden), kv = static_cast<double>(m.kv_dim());
    const double matrices = static_cast<double>(m.layers) * (2 * h * h + 2 * h * kv + 3 * h * static_cast<double>(m.ffn));
    const double passes = c.checkpointing == Checkpointing::full ? 3.0 : 2.0;
    return passes * matrices * (4.127 / 8 + weight_bytes(c.precision));
}

double link_bandwidth(const Hardware& hw, std::uint32_t ranks) {
    return ranks <= hw.gpus_per_node ? hw.intra_node_bytes_per_s : hw.inter_node_bytes_per_s;
}

double safe_div(double a, double b) { return b > 0 ? a / b : 0.0; }

// With probed rates (search/probed_rates.h): one micro-batch's GEMMs each at
// the rate measured for its shape and dtype, attention at its measured times,
// in seconds; the same passes as flops_per_token counts (backward twice the
// forward, recomputation, LOMO's norm pass). nullopt when a rate is missing.
struct ProbedMicroBatch {
    double gemm_s = 0;
    double attention_s = 0;
};
std::optional<ProbedMicroBatch> probed_micro_batch(const ModelSpec& m, const TrialConfig& c, const ProbedRates& p,
                                                   bool fused) {
    const double t = static_cast<double>(c.micro_batch) * c.context;
    const std::uint32_t bytes = weight_bytes(c.precision);
    bool missing = false;
    const auto gemm = [&](double rows, double n, double k) {
        if (rows * n * k == 0) return 0.0;
        const auto i = [](double x) { return static_cast<std::int64_t>(x); };
        const std::optional<double> rate = p.gemm_flops_per_s(i(rows), i(n), i(k), bytes);
        if (!rate) missing = true;
        return rate ? 2.0 * rows * n * k / *rate : 0.0;
    };
    // The GEMMs model_flops counts, each at its shape's rate: a base weight's
    // backward (dX, and dW unless frozen) at its forward's; the adapters' x A^T,
    // (x A^T) B^T forward and dY B, (dY B) A, dA, dB backward at their own (rank-r) shapes.
    const double passes = c.adapters() ? 2.0 : 3.0;
    double layer = 0, recompute_layer = 0;
    for (const Linear& l : layer_linears(m, c)) {
        const double base = gemm(t, l.out, l.in), project = gemm(t, l.rank, l.in);
        const double expand = gemm(t, l.out, l.rank);
        layer += passes * base + project + expand + gemm(t, l.rank, l.out) + gemm(t, l.in, l.rank) +
                 gemm(l.rank, l.in, t) + gemm(l.out, l.rank, t);
        recompute_layer += l.down ? project : base + project + expand;
    }
    const double head = passes * gemm(t, static_cast<double>(m.vocab), static_cast<double>(m.hidden));
    const std::optional<AttentionRate> a = p.attention_at(c.micro_batch, c.context, static_cast<std::int64_t>(m.heads),
                                                          static_cast<std::int64_t>(m.head_dim()), bytes, fused);
    if (missing || !a) return std::nullopt;
    const double layers = static_cast<double>(m.layers);
    const double step = layers * layer + head;
    double recompute = 0, attention_recompute = 0;
    if (c.checkpointing == Checkpointing::full) recompute = layers * recompute_layer;
    if (c.checkpointing != Checkpointing::none) attention_recompute = layers * a->forward_s;
    ProbedMicroBatch out;
    out.gemm_s = step + recompute;
    out.attention_s = layers * (a->forward_s + a->backward_s) + attention_recompute;
    if (lomo_backward_passes(c) > 1) {
        out.gemm_s += (passes - 1) / passes * step + recompute;
        out.attention_s += layers * a->backward_s + attention_recompute;
    }
    return out;
}

}  // namespace

namespace {

// The probed bus bandwidth for a plan's collectives (nccl-tests' busbw, so the
// bytes a rank sends over it are its time): stage 0 and LOMO all-reduce; the
// sharded stages reduce-scatter and all-gather about equal bytes, hence the
// harmonic mean of the two. Messages are one layer's flat buffer, the unit
// the trainer's collectives move. nullopt: not probed at this world size.
std::optional<double> probed_bus_bandwidth(const ModelSpec& m, const TrialConfig& c, const ProbedRates& p) {
    const std::uint32_t n = c.world_size;
    const double message = collective_message_bytes(m, c);
    if (zero_plan(c.zero_stage).all_reduces_gradients() || c.optimizer == Optimizer::lomo)
        return p.bus_bytes_per_s(Collective::all_reduce, n, message);
    const auto rs = p.bus_bytes_per_s(Collective::reduce_scatter, n, message);
    const auto ag = p.bus_bytes_per_s(Collective::all_gather, n, message);
    if (rs && ag) return 2 / (1 / *rs + 1 / *ag);
    return rs ? rs : ag;
}

// Compute and attention from the probed rates, scaled by how far the
// (calibrated) efficiencies moved from their defaults; the optimizer's
// traffic over the probed bandwidth; collectives over the probed bus
// bandwidth. Terms without a probe stay nominal.
void apply_probed_rates(const ModelSpec& m, const TrialConfig& c, const EstimateOptions& o, StepTime& t) {
    const ProbedRates& p = *o.probed;
    const double speed = o.compute_efficiency / EstimateOptions{}.compute_efficiency *
                         o.precision_efficiency[static_cast<std::size_t>(c.precision)] *
                         o.optimizer_efficiency[static_cast<std::size_t>(c.optimizer)];
    if (const auto micro = probed_micro_batch(m, c, p, c.attention == Attention::flash); micro && speed > 0) {
        t.compute_s = micro->gemm_s * c.grad_accum / speed;
        t.attention_s = micro->attention_s * c.grad_accum / speed;
    }
    if (p.memory_bytes_per_s > 0)
        t.optimizer_s = optimizer_traffic_per_element(c) * owned_elements(m, c) / p.memory_bytes_per_s;
    if (t.comm_bytes > 0)
        if (const auto bus = probed_bus_bandwidth(m, c, p); bus && *bus > 0)
            t.comm_s = (1 - o.comm_overlap) * t.comm_bytes / *bus;
}

}  // namespace

double collective_message_bytes(const ModelSpec& m, const TrialConfig& c) {
    const FlatLayout layout = flat_layout(m, c.adam8bit_block);
    const BufferKind buffer = c.adapters() ? adapter_buffer(m, c.lora_rank, c.lora_targets, c.adam8bit_block) : layout.layer;
    const std::uint64_t n = std::max<std::uint32_t>(c.world_size, 1);
    return static_cast<double>(full_numel(buffer.numel, n, layout.align)) * weight_bytes(c.precision);
}

StepTime step_time(const ModelSpec& m, const TrialConfig& c, const Hardware& hw, const EstimateOptions& o) {
    const Flops flops = flops_per_token(m, c, hw);
    const double peak = c.precision == Precision::fp32 ? hw.peak_flops_fp32 : hw.peak_flops_half;
    const double ranks = std::max<std::uint32_t>(c.world_size, 1);
    const double tokens_per_rank = static_cast<double>(c.micro_batch) * c.context * c.grad_accum;

    StepTime t;
    t.model_flops_per_token = flops.model;
    t.flops_per_token = flops.total;
    t.comm_bytes = comm_bytes_per_step(m, c);
    const double efficiency = std::min(1.0, o.compute_efficiency *
                                                o.precision_efficiency[static_cast<std::size_t>(c.precision)] *
                                                o.optimizer_efficiency[static_cast<std::size_t>(c.optimizer)]);
    t.compute_s = safe_div(flops.total * tokens_per_rank, peak * efficiency);
    t.comm_s = (1 - o.comm_overlap) * safe_div(t.comm_bytes, link_bandwidth(hw, c.world_size) * o.comm_efficiency);
    t.optimizer_s = safe_div(optimizer_traffic_per_element(c) * owned_elements(m, c), hw.hbm_bytes_per_s);
    t.attention_s = safe_div(attention_bytes_per_token(m, c, c.attention == Attention::flash) * tokens_per_rank, hw.hbm_bytes_per_s);
    t.dequantize_s = safe_div(dequantize_bytes_per_micro_batch(m, c) * c.grad_accum, hw.hbm_bytes_per_s);
    if (o.probed) apply_probed_rates(m, c, o, t);
    // Communication is not overlapped with compute by this engine (comm_overlap = 0): the terms add up.
    t.step_s = t.compute_s + t.comm_s + t.optimizer_s + t.attention_s + t.dequantize_s;
    t.tokens_per_s = safe_div(tokens_per_rank * ranks, t.step_s);
    t.mfu = safe_div(flops.model * t.tokens_per_s, peak * ranks);
    return t;
}

}  // namespace tune
