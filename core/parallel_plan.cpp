#include "core/parallel_plan.h"

#include "core/pipeline_schedule.h"
#include "core/pipeline_split.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

namespace tune {

std::string_view to_string(MeshAxis a) {
    switch (a) {
        case MeshAxis::tp:
            return "tp";
        case MeshAxis::cp:
            return "cp";
        case MeshAxis::dp:
            return "dp";
        case MeshAxis::pp:
            return "pp";
    }
    return "?";
}

ParallelPlan ParallelPlan::of(std::uint32_t dp, std::uint32_t tp, std::uint32_t pp, std::uint32_t cp,
                              std::uint32_t ep) {
    ParallelPlan p;
    p.dp = dp, p.tp = tp, p.pp = pp, p.cp = cp, p.ep = ep;
    p.ranks = p.mesh_ranks();
    return p;
}

std::uint32_t ParallelPlan::size(MeshAxis a) const {
    switch (a) {
        case MeshAxis::tp:
            return tp;
        case MeshAxis::cp:
            return cp;
        case MeshAxis::dp:
            return dp;
        case MeshAxis::pp:
            return pp;
    }
    return 1;
}

MeshCoordinates ParallelPlan::coordinates(std::uint32_t rank) const {
    MeshCoordinates at;
    for (MeshAxis a : kMeshOrder) {
        at[a] = rank % size(a);
        rank /= size(a);
    }
    return at;
}

std::uint32_t ParallelPlan::rank_of(const MeshCoordinates& at) const {
    std::uint32_t rank = 0;
    for (auto a = kMeshOrder.rbegin(); a != kMeshOrder.rend(); ++a) rank = rank * size(*a) + at[*a];
    return rank;
}

std::vector<std::uint32_t> ParallelPlan::group(std::initializer_list<MeshAxis> axes, std::uint32_t rank) const {
    const MeshCoordinates mine = coordinates(rank);
    std::vector<std::uint32_t> out;
    for (std::uint32_t r = 0; r < mesh_ranks(); ++r) {
        const MeshCoordinates other = coordinates(r);
        bool same = true;
        for (MeshAxis a : kMeshOrder)
            if (std::find(axes.begin(), axes.end(), a) == axes.end() && other[a] != mine[a]) same = false;
        if (same) out.push_back(r);
    }
    return out;
}

std::vector<std::vector<std::uint32_t>> ParallelPlan::groups(std::initializer_list<MeshAxis> axes) const {
    std::map<std::uint32_t, std::vector<std::uint32_t>> by_first;
    for (std::uint32_t r = 0; r < mesh_ranks(); ++r) {
        std::vector<std::uint32_t> g = group(axes, r);
        by_first.emplace(g.front(), std::move(g));
    }
    std::vector<std::vector<std::uint32_t>> out;
    for (auto& [first, g] : by_first) out.push_back(std::move(g));
    return out;
}

GroupSplit ParallelPlan::split(std::initializer_list<MeshAxis> axes, std::uint32_t rank) const {
    const std::vector<std::uint32_t> g = group(axes, rank);
    const auto at = std::find(g.begin(), g.end(), rank) - g.begin();
    return {static_cast<int>(g.front()), static_cast<int>(at)};
}

namespace {

// The place of a rank within its dp x cp group (cp inner, as the mesh numbers them).
std::uint32_t data_context_index(const ParallelPlan& p, const MeshCoordinates& at) {
    return at[MeshAxis::cp] + p.cp * at[MeshAxis::dp];
}

// The ranks of `rank`'s dp x cp group whose index i there satisfies keep(i).
template <typename Keep>
std::vector<std::uint32_t> data_context_ranks(const ParallelPlan& p, std::uint32_t rank, Keep keep) {
    std::vector<std::uint32_t> out;
    for (std::uint32_t r : p.group({MeshAxis::cp, MeshAxis::dp}, rank))
        if (keep(data_context_index(p, p.coordinates(r)))) out.push_back(r);
    return out;
}

}  // namespace

std::vector<std::uint32_t> ParallelPlan::expert_group(std::uint32_t rank) const {
    const std::uint32_t block = data_context_index(*this, coordinates(rank)) / ep;
    return data_context_ranks(*this, rank, [&](std::uint32_t i) { return i / ep == block; });
}

std::vector<std::uint32_t> ParallelPlan::expert_data_group(std::uint32_t rank) const {
    const std::uint32_t place = data_context_index(*this, coordinates(rank)) % ep;
    return data_context_ranks(*this, rank, [&](std::uint32_t i) { return i % ep == place; });
}

ModelSpec ParallelPlan::local(const ModelSpec& m) const {
    if (tp <= 1) return m;
    ModelSpec l = m;
    l.head_dim_setting = m.head_dim();  // hidden / local heads is no longer the head dim
    l.heads = m.heads / tp;
    l.kv_heads = m.kv_heads >= tp ? m.kv_heads / tp : 1;
    l.ffn = m.ffn / tp;
    l.vocab = padded_vocab(m) / tp;
    return l;
}

ParallelPlan parallel_plan(const TrialConfig& c) {
    ParallelPlan p;
    p.tp = std::max<std::uint32_t>(c.tensor_parallel, 1);
    p.pp = std::max<std::uint32_t>(c.pipeline_parallel, 1);
    p.virtual_stages = std::max<std::uint32_t>(c.virtual_stages, 1);
    p.layer_split = c.pipeline_split;
    const std::uint32_t model_parallel = p.tp * p.pp * p.cp;
    p.dp = c.world_size % model_parallel == 0 ? std::max<std::uint32_t>(c.world_size / model_parallel, 1) : 1;
    p.sequence_parallel = c.sequence_parallel && p.tp > 1;
    p.ranks = c.world_size;
    return p;
}

namespace {

Invalidity tensor_split(std::string reason) { return Invalidity{"tensor-parallel", std::move(reason)}; }
Invalidity mesh(std::string reason) { return Invalidity{"parallel-plan", std::move(reason)}; }

std::optional<Invalidity> sizes_problem(const ParallelPlan& p) {
    for (auto [size, name] :
         {std::pair{p.dp, "data_parallel"}, std::pair{p.tp, "tensor_parallel"}, std::pair{p.pp, "pipeline_parallel"},
          std::pair{p.cp, "context_parallel"}, std::pair{p.ep, "expert_parallel"}})
        if (size == 0) return Invalidity{"counts", fmt::format("{} must be positive (1: none)", name)};
    if (p.ranks != p.mesh_ranks())
        return mesh(fmt::format("the {} ranks are not data x tensor x pipeline x context parallel = {} x {} x {} x {}",
                                p.ranks, p.dp, p.tp, p.pp, p.cp));
    if (p.sequence_parallel && p.tp == 1)
        return tensor_split(
            "sequence_parallel on needs tensor_parallel > 1: it splits the sequence over the tensor-parallel "
            "ranks; use sequence_parallel off");
    return std::nullopt;
}

std::optional<Invalidity> tensor_problem(const ParallelPlan& p, const ModelSpec& m, std::uint32_t context) {
    const std::uint32_t tp = p.tp;
    if (tp == 1) return std::nullopt;
    if (m.heads % tp != 0)
        return tensor_split(
            fmt::format("tensor_parallel {} does not divide the model's {} attention heads", tp, m.heads));
    if (m.kv_heads % tp != 0 && tp % m.kv_heads != 0)
        return tensor_split(
            fmt::format("tensor_parallel {} neither divides the model's {} KV heads nor is a multiple of "
                        "them (Megatron replicates each KV head tp / kv_heads times)",
                        tp, m.kv_heads));
    if (m.ffn % tp != 0)
        return tensor_split(fmt::format("tensor_parallel {} does not divide the model's ffn {}", tp, m.ffn));
    if (p.sequence_parallel && context % (tp * p.cp) != 0)
        return tensor_split(
            fmt::format("sequence_parallel splits each sequence over the {} tensor-parallel ranks: context "
                        "{} is not a multiple of {}",
                        tp, context, tp * p.cp));
    return std::nullopt;
}

std::optional<Invalidity> mesh_problem(const ParallelPlan& p, const ModelSpec& m, std::uint32_t context,
                                       std::optional<std::uint32_t> ranks_per_node) {
    if (p.pp > 1)
        if (auto bad =
                pipeline_split_problem(static_cast<std::uint32_t>(m.layers), p.pp, p.virtual_stages, p.layer_split))
            return Invalidity{"pipeline", std::move(*bad)};
    if (p.cp > 1 && context % p.cp != 0)
        return mesh(
            fmt::format("context_parallel {} does not divide the context {}: each rank holds context / {} "
                        "tokens",
                        p.cp, context, p.cp));
    if (p.ep > 1 && (p.dp * p.cp) % p.ep != 0)
        return mesh(
            fmt::format("expert_parallel {} does not divide the {} data x context parallel ranks it is "
                        "carved from",
                        p.ep, p.dp * p.cp));
    if (p.ep > 1)
        return mesh(
            fmt::format("expert_parallel {} needs a mixture-of-experts model; {} is dense (use "
                        "expert_parallel 1)",
                        p.ep, m.name.empty() ? "this model" : m.name));
    // A tensor-parallel group exchanges activations every layer, so its ranks share a node's links.
    if (ranks_per_node && *ranks_per_node > 0 && p.tp > 1 && *ranks_per_node % p.tp != 0)
        return tensor_split(
            fmt::format("tensor_parallel {} does not fit within a node of {} ranks: its ranks "
                        "exchange activations every layer and stay on one node's links",
                        p.tp, *ranks_per_node));
    return std::nullopt;
}

}  // namespace

std::optional<Invalidity> parallel_plan_problem(const ParallelPlan& p, const ModelSpec& m, std::uint32_t context,
                                                std::optional<std::uint32_t> ranks_per_node) {
    if (auto bad = sizes_problem(p)) return bad;
    if (auto bad = tensor_problem(p, m, context)) return bad;
    return mesh_problem(p, m, context, ranks_per_node);
}

std::optional<Invalidity> parallel_problem(const TrialConfig& c) {
    if (c.tensor_parallel == 0)
        return Invalidity{"counts", "tensor_parallel must be positive (1: no tensor parallelism)"};
    if (c.pipeline_parallel == 0)
        return Invalidity{"counts", "pipeline_parallel must be positive (1: no pipeline parallelism)"};
    if (c.sequence_parallel && c.tensor_parallel == 1) return sizes_problem(ParallelPlan{.sequence_parallel = true});
    ParallelPlan p = parallel_plan(c);
    const std::uint32_t model_parallel = p.tp * p.pp * p.cp;
    if (c.world_size % model_parallel != 0) {
        if (p.pp == 1)
            return tensor_split(
                fmt::format("tensor_parallel {} does not divide the world size {}: the world is data-parallel "
                            "replicas of tensor_parallel ranks each",
                            p.tp, c.world_size));
        return mesh(
            fmt::format("tensor_parallel x pipeline_parallel = {} x {} does not divide the world size {}: "
                        "the world is data-parallel replicas of tp x pp ranks each",
                        p.tp, p.pp, c.world_size));
    }
    if (p.pp > 1 || c.virtual_stages > 1)
        if (auto bad = pipeline_schedule_problem(c.pipeline_schedule, p.pp, c.virtual_stages, c.grad_accum))
            return Invalidity{"pipeline", std::move(*bad)};
    // The requested sequence parallelism, so a plan that cannot split the sequence says so.
    p.sequence_parallel = c.sequence_parallel;
    return parallel_plan_problem(p, c.model, c.context);
}

}  // namespace tune
