#include "search/tensor_parallel_calls.h"

#include "core/tensor_parallel.h"
#include "search/collective_calls.h"
#include "search/estimate_memory.h"
#include "search/model_flops.h"
#include "search/recompute.h"

namespace tune {
namespace {

// Per micro-batch: the (T, h) activation's collectives around the tensor-parallel regions.
void add_activation_calls(std::vector<TensorParallelCall>& out, const ModelSpec& m, const TrialConfig& c,
                          const TensorParallelPlan& tp, double micro_batches) {
    const double activation =
        static_cast<double>(weight_bytes(c.precision)) * c.micro_batch * c.context * static_cast<double>(m.hidden);
    const double layers = static_cast<double>(m.layers);
    const Recomputed again = recomputed(c.checkpointing);
    double rerun_rows = 0;  // row-parallel linears whose forward runs again (o under full and selective-op)
    bool reruns = false;    // any linear: the recompute gathers both regions' inputs (sequence parallelism)
    for (const Linear& l : layer_linears(m, c)) {
        if (l.adds_to_residual && again.reruns(l)) rerun_rows += 1;
        reruns = reruns || again.reruns(l);
    }
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
    // input gathered again; the head's dX reduce-scattered, the embedding's output gradient gathered.
    add(Collective::all_gather, layers * (2 + (reruns ? 2 : 0) + 4) + 1 + 1);
    add(Collective::reduce_scatter, 1 + layers * (2 + rerun_rows + 2) + 1);
}

}  // namespace

std::vector<TensorParallelCall> tensor_parallel_calls(const ModelSpec& model, const TrialConfig& c) {
    const TensorParallelPlan tp = tensor_parallel_plan(c);
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
    const std::uint64_t replicas = tp.kv_replicas(model);
    if (replicas > 1 && !c.adapters())
        out.push_back({Collective::all_reduce, 2.0 * static_cast<double>(m.kv_dim() * m.hidden * m.layers) * wb, 1,
                       static_cast<std::uint32_t>(replicas)});
    if (tp.sequence_parallel && !c.adapters())
        out.push_back({Collective::all_reduce, static_cast<double>((2 * m.layers + 1) * m.hidden) * wb, 1, tp.tp});
    // The global norm: its sum of squares and the replicated tensors' (counted once over the group), or
    // LOMO's one sum where its norm pass runs.
    if (c.optimizer != Optimizer::lomo)
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
