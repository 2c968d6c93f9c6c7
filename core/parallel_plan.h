// A rank's place in the parallel mesh, named once (torchtitan's ParallelDims,
// torchtitan/distributed/parallel_dims.py; Megatron-Core's parallel_state,
// megatron/core/parallel_state.py initialize_model_parallel).
//
//   world = dp x tp x pp x cp; ep carves expert groups out of the dp x cp ranks.
//   The mesh order is tp innermost, then cp, dp and pp outermost (Megatron's
//   default "tp-cp-ep-dp-pp"): consecutive ranks share a layer's matrices, so the
//   tp group sits within a node; a stage's ranks are contiguous.
//   rank = tp_rank + tp (cp_rank + cp (dp_rank + dp pp_rank)).
//   A group over some axes is the ranks that differ from a rank only along them.
//   ZeRO and FSDP shard over the dp group (zero_shards); Megatron's distributed
//   optimizer over dp x cp is the megatron profile's own rule.
//
// Tensor parallelism (Megatron-LM's scheme, Shoeybi et al. 2019; sequence
// parallelism, Korthikanti et al. 2022), as a tp rank holds it:
//   column-parallel q, k, v, gate, up: each rank holds heads / tp query heads,
//     its KV heads (kv_heads / tp, or one KV head replicated tp / kv_heads
//     times when tp > kv_heads) and ffn / tp;
//   row-parallel o and down: the matching input columns; their outputs are
//     partial sums all-reduced over tp (reduce-scattered with sp);
//   the embedding and the LM head are split over a vocabulary padded to a
//     multiple of tp, with a parallel cross-entropy, so no rank holds the full
//     logits; norms and row-parallel biases are whole on every rank;
//   sequence parallelism splits the (tokens, hidden) tensors between the tp
//     regions (residual, norms) along the sequence: all-gathered before each
//     region, reduce-scattered after it.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string_view>
#include <vector>

#include "core/config.h"
#include "core/validity.h"

namespace tune {

enum class MeshAxis : std::uint8_t { tp, cp, dp, pp };
// Innermost first: the order ranks are numbered in.
inline constexpr std::array<MeshAxis, 4> kMeshOrder{MeshAxis::tp, MeshAxis::cp, MeshAxis::dp, MeshAxis::pp};
std::string_view to_string(MeshAxis a);

// A rank's coordinate along each axis.
struct MeshCoordinates {
    std::array<std::uint32_t, kMeshOrder.size()> at{};  // indexed by MeshAxis
    std::uint32_t operator[](MeshAxis a) const { return at[static_cast<std::size_t>(a)]; }
    std::uint32_t& operator[](MeshAxis a) { return at[static_cast<std::size_t>(a)]; }
    bool operator==(const MeshCoordinates&) const = default;
};

// What Comm::split takes to form a rank's group: the group's first rank as colour, the rank's place in it as key.
struct GroupSplit {
    int color = 0;
    int key = 0;
};

struct ParallelPlan {
    std::uint32_t dp = 1;  // data-parallel replicas
    std::uint32_t tp = 1;  // ranks that split one layer's matrices
    std::uint32_t pp = 1;  // pipeline stages
    std::uint32_t cp = 1;  // ranks that split one sequence
    std::uint32_t ep = 1;  // ranks that split the experts, within dp x cp
    bool sequence_parallel = false;
    std::uint32_t virtual_stages = 1;                 // model chunks per pipeline stage (interleaved schedule)
    PipelineSplit layer_split = PipelineSplit::even;  // how the layers divide over the virtual stages
    // The ranks started: dp x tp x pp x cp in a plan that can be built (a configuration's world_size that does
    // not divide into its sizes is one that cannot, and still starts this many).
    std::uint32_t ranks = 1;

    // A plan of these sizes over exactly their ranks.
    static ParallelPlan of(std::uint32_t dp, std::uint32_t tp, std::uint32_t pp = 1, std::uint32_t cp = 1,
                           std::uint32_t ep = 1);

    std::uint32_t size(MeshAxis a) const;
    std::uint32_t world() const { return ranks; }
    std::uint32_t mesh_ranks() const { return dp * tp * pp * cp; }
    // The ranks ZeRO and FSDP shard a replica's states over.
    std::uint32_t zero_shards() const { return dp; }
    // The replicas of one expert: the dp x cp ranks less the expert split.
    std::uint32_t expert_data_parallel() const { return dp * cp / ep; }

    MeshCoordinates coordinates(std::uint32_t rank) const;
    std::uint32_t rank_of(const MeshCoordinates& at) const;
    // The ranks that differ from `rank` only along `axes`, in rank order: the group a collective over them runs on.
    std::vector<std::uint32_t> group(std::initializer_list<MeshAxis> axes, std::uint32_t rank) const;
    // Every such group once, in the order of their first ranks: a partition of the world.
    std::vector<std::vector<std::uint32_t>> groups(std::initializer_list<MeshAxis> axes) const;
    GroupSplit split(std::initializer_list<MeshAxis> axes, std::uint32_t rank) const;
    // Megatron-Core's expert groups: ep consecutive ranks of a rank's dp x cp group hold different
    // experts (expert parallel); the ranks at the same place in each such block replicate them.
    std::vector<std::uint32_t> expert_group(std::uint32_t rank) const;
    std::vector<std::uint32_t> expert_data_group(std::uint32_t rank) const;

    // Ranks holding a copy of the same KV head: tp / kv_heads when tp > kv_heads, else 1.
    std::uint64_t kv_replicas(const ModelSpec& m) const {
        return m.kv_heads > 0 && tp > m.kv_heads ? tp / m.kv_heads : 1;
    }
    // The vocabulary padded to a multiple of tp: the padding's rows are parameters like the others.
    std::uint64_t padded_vocab(const ModelSpec& m) const { return (m.vocab + tp - 1) / tp * tp; }
    // The model one tp rank holds: heads, KV heads, ffn and vocabulary split, hidden and head dim whole.
    ModelSpec local(const ModelSpec& m) const;
    // Tokens of a (tokens, hidden) tensor outside the tp regions: split along the sequence with sp.
    std::uint64_t sequence_tokens(std::uint64_t tokens) const { return sequence_parallel ? tokens / tp : tokens; }
};

// A configuration's plan: tp from tensor_parallel, dp the rest of world_size (1 when it does not divide;
// validity refuses that). pp, cp and ep are 1 until the configuration names them.
ParallelPlan parallel_plan(const TrialConfig& c);

// Why `p` cannot be built for model `m` at `context` tokens: a size of 0, sequence parallelism without tp, a
// size that does not divide the heads, KV heads, ffn, layers, context or the dp x cp ranks, experts of a dense
// model, a tp group larger than a node of `ranks_per_node`. nullopt when it can.
std::optional<Invalidity> parallel_plan_problem(const ParallelPlan& p, const ModelSpec& m, std::uint32_t context,
                                                std::optional<std::uint32_t> ranks_per_node = std::nullopt);

// The same for a configuration, whose world_size must be a multiple of tp x pp x cp.
std::optional<Invalidity> parallel_problem(const TrialConfig& c);

}  // namespace tune
