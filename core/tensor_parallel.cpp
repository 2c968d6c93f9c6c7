#include "core/tensor_parallel.h"

#include <algorithm>

#include <fmt/format.h>

namespace tune {

ModelSpec TensorParallelPlan::local(const ModelSpec& m) const {
    if (tp <= 1) return m;
    ModelSpec l = m;
    l.head_dim_setting = m.head_dim();  // hidden / local heads is no longer the head dim
    l.heads = m.heads / tp;
    l.kv_heads = m.kv_heads >= tp ? m.kv_heads / tp : 1;
    l.ffn = m.ffn / tp;
    l.vocab = padded_vocab(m) / tp;
    return l;
}

std::uint32_t data_parallel_size(const TrialConfig& c) {
    const std::uint32_t tp = std::max<std::uint32_t>(c.tensor_parallel, 1);
    return c.world_size % tp == 0 ? std::max<std::uint32_t>(c.world_size / tp, 1) : 1;
}

TensorParallelPlan tensor_parallel_plan(const TrialConfig& c) {
    TensorParallelPlan p;
    p.tp = std::max<std::uint32_t>(c.tensor_parallel, 1);
    p.dp = data_parallel_size(c);
    p.sequence_parallel = c.sequence_parallel && p.tp > 1;
    return p;
}

namespace {

Invalidity split(std::string reason) { return Invalidity{"tensor-parallel", std::move(reason)}; }

}  // namespace

std::optional<Invalidity> tensor_parallel_problem(const TrialConfig& c) {
    const std::uint32_t tp = c.tensor_parallel;
    const ModelSpec& m = c.model;
    if (tp == 0) return Invalidity{"counts", "tensor_parallel must be positive (1: no tensor parallelism)"};
    if (c.sequence_parallel && tp == 1)
        return split(
            "sequence_parallel on needs tensor_parallel > 1: it splits the sequence over the tensor-parallel "
            "ranks; use sequence_parallel off");
    if (tp == 1) return std::nullopt;
    if (c.world_size % tp != 0)
        return split(
            fmt::format("tensor_parallel {} does not divide the world size {}: the world is data-parallel "
                        "replicas of tensor_parallel ranks each",
                        tp, c.world_size));
    if (m.heads % tp != 0)
        return split(fmt::format("tensor_parallel {} does not divide the model's {} attention heads", tp, m.heads));
    if (m.kv_heads % tp != 0 && tp % m.kv_heads != 0)
        return split(
            fmt::format("tensor_parallel {} neither divides the model's {} KV heads nor is a multiple of "
                        "them (Megatron replicates each KV head tp / kv_heads times)",
                        tp, m.kv_heads));
    if (m.ffn % tp != 0) return split(fmt::format("tensor_parallel {} does not divide the model's ffn {}", tp, m.ffn));
    if (c.sequence_parallel && c.context % tp != 0)
        return split(
            fmt::format("sequence_parallel splits each sequence over the {} tensor-parallel ranks: context "
                        "{} is not a multiple of {}",
                        tp, c.context, tp));
    return std::nullopt;
}

}  // namespace tune
