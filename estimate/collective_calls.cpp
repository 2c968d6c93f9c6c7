#include "estimate/collective_calls.h"

#include <algorithm>

#include "core/parallel_plan.h"
#include "core/zero_plan.h"
#include "estimate/flat_layout.h"
#include "kernels/math/nf4.h"

namespace tune {

double lomo_backward_passes(const TrialConfig& c) {
    return c.optimizer == Optimizer::lomo && (c.clip > 0 || c.precision == Precision::fp16_mixed) ? 2.0 : 1.0;
}

namespace {

// What stage 3 gathers of one base layer, in elements of the weights' dtype:
// the padded layer, or with qlora its NF4 codes, absmax codes and scales over
// whole absmax groups per rank (three calls).
double base_layer_gathered(double layer, std::uint64_t ranks, const TrialConfig& c) {
    if (c.method != Method::qlora) return layer;
    const math::Nf4Sizes s =
        math::nf4_sizes(math::nf4_shard(static_cast<std::int64_t>(layer), static_cast<std::int64_t>(ranks)).padded);
    return static_cast<double>(s.packed + s.absmax + 4 * s.scales) / weight_bytes(c.precision);
}

// The buffers of a step in bytes (padded to equal shards) and how many there are.
struct Buffers {
    double layer = 0;       // one layer's trained buffer (the adapters' under LoRA)
    double outer = 0;       // embedding, final norm, LM head; 0 when frozen (LoRA)
    double base_layer = 0;  // what stage 3 gathers of one base layer (LoRA: besides the adapters)
    double base_outer = 0;
    double layers = 0;
    double layer_tensors = 0, outer_tensors = 0;  // trained tensors: LOMO reduces each alone
    double params = 0;                            // trained elements, unpadded, in bytes
    bool adapters = false, qlora = false;
};

Buffers buffers_of(const ModelSpec& m, const TrialConfig& c, std::uint64_t n) {
    const FlatLayout layout = flat_layout(m, c.adam8bit_block);
    const double wb = weight_bytes(c.precision);
    const auto padded = [&](std::uint64_t numel) { return static_cast<double>(full_numel(numel, n, layout.align)); };
    Buffers b;
    b.layers = static_cast<double>(m.layers);
    b.adapters = c.adapters();
    b.qlora = c.method == Method::qlora;
    b.base_layer = base_layer_gathered(padded(layout.layer.numel), n, c) * wb;
    b.base_outer = padded(layout.outer.numel) * wb;
    if (b.adapters) {
        const BufferKind a = adapter_buffer(m, c.lora_rank, c.lora_targets, c.adam8bit_block);
        b.layer = padded(a.numel) * wb;
        b.layer_tensors = static_cast<double>(a.tensors);
        b.params = b.layers * padded(a.numel) * wb;  // as the byte count has it: padded adapters
        return b;
    }
    b.layer = padded(layout.layer.numel) * wb;
    b.outer = b.base_outer;
    b.layer_tensors = static_cast<double>(layout.layer.tensors);
    b.outer_tensors = static_cast<double>(layout.outer.tensors);
    b.params = static_cast<double>(m.param_count()) * wb;
    return b;
}

// Stage 3's gathers of one micro-batch (or LOMO pass): every base buffer twice
// (the layers for forward and backward, the outer buffer for the embedding and
// the head; qlora's layers as three calls each), the adapters beside the layers.
void add_stage3_gathers(std::vector<CollectiveCall>& out, const Buffers& b, double times) {
    const double per_layer = b.qlora ? 3.0 : 1.0;
    out.push_back({Collective::all_gather, b.base_layer / per_layer, times * 2 * b.layers * per_layer});
    out.push_back({Collective::all_gather, b.base_outer, times * 2});
    if (b.adapters) out.push_back({Collective::all_gather, b.layer, times * 2 * b.layers});
}

std::vector<CollectiveCall> lomo_calls(const Buffers& b, const ZeroPlan& zero, const TrialConfig& c) {
    std::vector<CollectiveCall> out;
    const double passes = lomo_backward_passes(c);
    // Each trained tensor's gradient all-reduced alone, once per backward pass.
    const double tensors = b.layers * b.layer_tensors + b.outer_tensors;
    out.push_back({Collective::all_reduce, b.params / tensors, passes * tensors});
    // Stages 1-2: each buffer's new weights gathered after the applying pass (the outer
    // buffer twice: after the head and after the embedding); stage 3 gathers in every pass.
    if (zero.gathers_weights_after_update()) {
        out.push_back({Collective::all_gather, b.layer, b.layers});
        if (b.outer > 0) out.push_back({Collective::all_gather, b.outer, 2});
    } else if (zero.gathers_weights_before_use()) {
        add_stage3_gathers(out, b, passes * c.grad_accum);
    }
    return out;
}

}  // namespace

std::vector<CollectiveCall> collective_calls(const ModelSpec& model, const TrialConfig& c) {
    const std::uint64_t n = parallel_plan(c).dp;
    if (n == 1) return {};
    const ModelSpec m = parallel_plan(c).local(model);
    const ZeroPlan zero = zero_plan(c.zero_stage);
    const Buffers b = buffers_of(m, c, n);
    if (c.optimizer == Optimizer::lomo) return lomo_calls(b, zero, c);
    std::vector<CollectiveCall> out;
    const double outer_buffers = b.outer > 0 ? 1.0 : 0.0;
    // Gradients: all-reduced (stage 0) or reduce-scattered (stage 1) once per step and
    // buffer, or reduce-scattered per micro-batch from buckets (the outer one twice:
    // the head's and the embedding's backward).
    if (zero.all_reduces_gradients() || zero.reduce_scatters_after_backward()) {
        const Collective op = zero.all_reduces_gradients() ? Collective::all_reduce : Collective::reduce_scatter;
        out.push_back({op, b.layer, b.layers});
        if (b.outer > 0) out.push_back({op, b.outer, 1});
    } else {
        out.push_back({Collective::reduce_scatter, b.layer, c.grad_accum * b.layers, true});
        if (b.outer > 0) out.push_back({Collective::reduce_scatter, b.outer, c.grad_accum * 2.0, true});
    }
    // Weights: gathered once after the update (stages 1-2) or before every use (stage 3).
    if (zero.gathers_weights_after_update()) {
        out.push_back({Collective::all_gather, b.layer, b.layers});
        if (b.outer > 0) out.push_back({Collective::all_gather, b.outer, 1});
    } else if (zero.gathers_weights_before_use()) {
        add_stage3_gathers(out, b, c.grad_accum);
    }
    // Sharded updates complete the global norm with one scalar all-reduce; Adafactor
    // over shards its partial sums with two per buffer (§4 O).
    if (zero.updates_own_shard_only()) {
        // With tensor parallelism the replicated tensors' sum goes beside it (train/trainer.cpp).
        out.push_back({Collective::all_reduce, c.tensor_parallel > 1 ? 8.0 : 4.0, 1});
        if (c.optimizer == Optimizer::adafactor) {
            const FlatLayout layout = flat_layout(m, c.adam8bit_block);
            const auto sums = [](const BufferKind& k) { return static_cast<double>(k.sums - k.tensors); };
            const double buffers = b.layers + outer_buffers;
            const double total = 4 * (b.layers * sums(layout.layer) + sums(layout.outer));
            out.push_back({Collective::all_reduce, total / (2 * buffers), 2 * buffers});
        }
    }
    return out;
}

}  // namespace tune
