// The collectives of the tensor-parallel group one optimizer step calls, per
// rank, following Megatron-LM's schedule (core/parallel_plan.h names what
// is split). Per micro-batch, with T tokens and the (T, h) activation A:
//
//   without sequence parallelism, each an all-reduce of A:
//     forward    the vocabulary-parallel embedding's lookup, and each layer's
//                two row-parallel outputs (o, down);
//     recompute  the row-parallel linears the checkpointing mode runs again;
//     backward   each layer's two column-parallel regions' input gradients
//                (attention's and the MLP's dn), and the LM head's dX;
//   with sequence parallelism each region's all-reduce becomes an all-gather
//     of its input and a reduce-scatter of its output; backward gathers the
//     output gradient, reduce-scatters the input gradient and gathers the
//     input again for the weight gradients (Korthikanti et al. 2022, §4.2.2);
//     a recompute gathers both regions' inputs again;
//   the parallel cross-entropy: three all-reduces of one fp32 per row and
//     LM-head chunk (max, sum of exponentials, target logit);
//   per step: KV weight gradients summed over the ranks that replicate a KV
//     head; the replicated tensors' gradients each rank computed in part
//     (LoRA's whole A of a column-parallel linear and whole B of a
//     row-parallel one; else the q/k norms', and with sequence parallelism
//     every norm's); and the global norm's two sums (all, and the replicated
//     tensors', which every rank counts).
#pragma once

#include <cstdint>
#include <vector>

#include "core/config.h"
#include "estimate/probed_rates.h"

namespace tune {

struct TensorParallelCall {
    Collective op = Collective::all_reduce;
    double bytes = 0;         // the buffer, as nccl-tests sizes it
    double count = 0;         // calls per optimizer step
    std::uint32_t ranks = 1;  // the group: tp, or the ranks sharing one KV head
};

// Empty without tensor parallelism. `m` is the whole model.
std::vector<TensorParallelCall> tensor_parallel_calls(const ModelSpec& m, const TrialConfig& c);

// Sum of count * bytes * bus_factor(op, ranks): the bytes each rank sends to its tensor-parallel peers per step.
double tensor_parallel_bytes(const std::vector<TensorParallelCall>& calls);

}  // namespace tune
