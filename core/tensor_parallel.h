// What tensor parallelism means, named once (Megatron-LM's scheme, Shoeybi et
// al. 2019; sequence parallelism, Korthikanti et al. 2022). The estimator asks
// this plan for the model one tensor-parallel rank holds, and the dimension
// validity rules live here.
//
//   world = dp x tp; the tp ranks of a replica sit within one node, and every
//   per-replica quantity (tokens per step, ZeRO's shards, gradient reduction)
//   is over the dp group.
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

#include <cstdint>
#include <optional>

#include "core/config.h"
#include "core/validity.h"

namespace tune {

struct TensorParallelPlan {
    std::uint32_t tp = 1;  // ranks that split one layer's matrices
    std::uint32_t dp = 1;  // replicas: world / tp
    bool sequence_parallel = false;

    // Ranks holding a copy of the same KV head: tp / kv_heads when tp > kv_heads, else 1.
    std::uint64_t kv_replicas(const ModelSpec& m) const {
        return m.kv_heads > 0 && tp > m.kv_heads ? tp / m.kv_heads : 1;
    }
    // The vocabulary padded to a multiple of tp: the padding's rows are parameters like the others.
    std::uint64_t padded_vocab(const ModelSpec& m) const { return (m.vocab + tp - 1) / tp * tp; }
    // The model one rank holds: heads, KV heads, ffn and vocabulary split, hidden and head dim whole.
    ModelSpec local(const ModelSpec& m) const;
    // Tokens of a (tokens, hidden) tensor outside the tp regions: split along the sequence with sp.
    std::uint64_t sequence_tokens(std::uint64_t tokens) const { return sequence_parallel ? tokens / tp : tokens; }
};

TensorParallelPlan tensor_parallel_plan(const TrialConfig& c);

// The replicas of a configuration: world_size / tensor_parallel (1 when it does not divide; validity refuses that).
std::uint32_t data_parallel_size(const TrialConfig& c);

// Why `c`'s tensor and sequence parallelism cannot split its model or world, naming which part fails, or nullopt.
std::optional<Invalidity> tensor_parallel_problem(const TrialConfig& c);

}  // namespace tune
