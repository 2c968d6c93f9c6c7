#include "estimate/tensor_parallel_calls.h"

#include <algorithm>

#include "core/parallel_plan.h"
#include "core/peft_modules.h"
#include "core/zero_plan.h"
#include "estimate/collective_calls.h"
#include "estimate/estimate_memory.h"
#include "estimate/model_flops.h"
#include "estimate/recompute.h"

namespace tune {
namespace {

// Per micro-batch: the (T, h) activation's collectives around the tensor-parallel regions.
void add_activation_calls(std::vector<TensorParallelCall>& out, const ModelSpec& m, const TrialConfig& c,
                          const ParallelPlan& tp, double micro_batches) {
    const double activation =
        static_cast<double>(weight_bytes(c.precision)) * c.micro_batch * c.context * static_cast<double>(m.hidden);
    const double layers = static_cast<double>(m.layers);
    const Recomputed again = recomputed(c.checkpointing);
    double rerun_rows = 0;    // row-parallel linears whose forward runs again (o under full and selective-op)
    double rerun_inputs = 0;  // column-parallel regions a recompute gathers the input of again (sequence parallelism)
    const std::vector<Linear> linears = layer_linears(m, c);  // q, k, v | o | gate, up | down
    for (const Linear& l : linears)
        if (l.adds_to_residual && again.reruns(l)) rerun_rows += 1;
    const auto region_reruns = [&](std::size_t first, std::size_t last) {
        return std::any_of(linears.begin() + first, linears.begin() + last,
                           [&](const Linear& l) { return again.reruns(l); });
    };
    rerun_inputs += region_reruns(0, 3) ? 1 : 0;
    rerun_inputs += region_reruns(4, 6) ? 1 : 0;
    const auto add = [&](Collective op, double per_micro_batch) {
        if (per_micro_batch > 0) out.push_back({op, activation, per_micro_batch * micro_batches, tp.tp});
    };
    if (!tp.sequence_parallel) {
        // Embedding; two regions forward, the rerun ones, two backward; the head's dX.
        add(Collective::all_reduce, 1 + layers * (4 + rerun_rows) + 1);
        return;
    }
    // Forward: the embedding's reduce-scatter, each region's gather and reduce-scatter, the head's gather.
    // Backward: per region the output gradient gathered, the input gradient reduce-scattered and the
    // input gathered again; the head's dX reduce-scattered, the embedding's output gradient gathered (LoRA
    // freezes the embedding: it has no backward).
    add(Collective::all_gather, layers * (2 + rerun_inputs + 4) + 1 + (c.adapters() ? 0 : 1));
    add(Collective::reduce_scatter, 1 + layers * (2 + rerun_rows + 2) + 1);
}

// The replicated tensors whose gradients each rank computes in part (train/ Trainer::partial_over_group):
// with LoRA, a column-parallel base's whole A (r, h) and a row-parallel base's whole B (h, r), since the
// norms are frozen; else the q/k norms (each rank saw its heads), and with sequence parallelism every norm
// (each rank saw its rows).
double partial_replicated_elements(const ModelSpec& m, const TrialConfig& c) {
    const auto layers = static_cast<double>(m.layers), h = static_cast<double>(m.hidden);
    if (c.adapters()) return layers * static_cast<double>(lora_target_count(c.lora_targets) * c.lora_rank) * h;
    double n = m.qk_norm ? layers * 2 * static_cast<double>(m.head_dim()) : 0;
    if (c.sequence_parallel) n += (2 * layers + 1) * h;
    return n;
}

// The trained tensors of a KV head that the ranks replicating it share, each rank's gradient a part of
// theirs: k's and v's weights and biases, or, with LoRA, the B of a k or v adapter (m is the local model).
double kv_shared_elements(const ModelSpec& m, const TrialConfig& c) {
    const auto layers = static_cast<double>(m.layers), kv = static_cast<double>(m.kv_dim());
    if (!c.adapters()) return layers * 2 * (kv * static_cast<double>(m.hidden) + (m.qkv_bias ? kv : 0));
    double adapted = 0;  // k and v among the targets (kLlamaLinears: q, k, v, ...)
    for (std::size_t i : {std::size_t{1}, std::size_t{2}}) adapted += lora_adapts(c.lora_targets, i) ? 1 : 0;
    return layers * adapted * kv * c.lora_rank;
}

}  // namespace

std::vector<TensorParallelCall> tensor_parallel_calls(const ModelSpec& model, const TrialConfig& c) {
    const ParallelPlan tp = parallel_plan(c);
    if (tp.tp == 1) return {};
    const ModelSpec m = tp.local(model);
    const double micro_batches = c.grad_accum * lomo_backward_passes(c);
    std::vector<TensorParallelCall> out;
    add_activation_calls(out, m, c, tp, micro_batches);
    // The parallel cross-entropy's statistics, chunk by chunk.
    const std::uint64_t tokens = std::uint64_t{c.micro_batch} * c.context;
    const std::uint64_t rows = logit_chunk_rows(tokens, m.vocab);
    const double chunks = static_cast<double>((tokens + rows - 1) / rows);
    out.push_back({Collective::all_reduce, 4.0 * static_cast<double>(rows), 3 * chunks * micro_batches, tp.tp});
    const double wb = weight_bytes(c.precision);
    const bool lomo = c.optimizer == Optimizer::lomo;
    // A step's gradient sums over the ranks that share them: once a step over each rank's ZeRO shard, or,
    // under LOMO, each whole gradient as its backward passes make it.
    const auto add_summed = [&](double elements, std::uint64_t ranks) {
        const bool sharded = !lomo && zero_plan(c.zero_stage).updates_own_shard_only();
        if (elements > 0)
            out.push_back({Collective::all_reduce, elements * wb / (sharded ? parallel_plan(c).dp : 1),
                           lomo ? micro_batches : 1, static_cast<std::uint32_t>(ranks)});
    };
    if (tp.kv_replicas(model) > 1) add_summed(kv_shared_elements(m, c), tp.kv_replicas(model));
    add_summed(partial_replicated_elements(m, c), tp.tp);
    // The global norm: its sum of squares and the replicated tensors' (counted once over the group), or
    // LOMO's one sum where its norm pass runs.
    if (!lomo)
        out.push_back({Collective::all_reduce, 8.0, 1, tp.tp});
    else if (lomo_backward_passes(c) > 1)
        out.push_back({Collective::all_reduce, 4.0, 1, tp.tp});
    return out;
}

double tensor_parallel_bytes(const std::vector<TensorParallelCall>& calls) {
    double bytes = 0;
    for (const TensorParallelCall& call : calls) bytes += call.count * call.bytes * bus_factor(call.op, call.ranks);
    return bytes;
}

}  // namespace tune
