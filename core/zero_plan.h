// What a ZeRO stage means, named once. The trainer, its optimizer and model
// state, and the estimator ask this plan what is sharded and when something is
// gathered or reduce-scattered, instead of comparing stage numbers; each side
// keeps its own arithmetic (docs/memory-model.md is the contract between them).
//
//   stage 0  nothing sharded; gradients all-reduced after backward
//   stage 1  + master weights and optimizer states sharded; the gradient buffer
//              is reduce-scattered after backward, updated weights all-gathered
//   stage 2  + gradients sharded: each buffer reduce-scattered as backward
//              produces it (a transient bucket), weights all-gathered after the step
//   stage 3  + parameters sharded: each buffer all-gathered just before its
//              forward, recompute and backward, freed after. A frozen base
//              (lora, qlora) is sharded too; qlora's NF4 layers on whole
//              absmax groups (kernels/math/nf4.h, nf4_shard)
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace tune {

inline constexpr std::uint32_t kMaxZeroStage = 3;

struct ZeroPlan {
    std::uint32_t stage = 0;
    bool shards_optimizer_states = false;  // each rank keeps and updates the states of its shard only
    bool shards_master_weights = false;    // the fp32 master copy (mixed precision) likewise
    bool shards_gradients = false;         // the persistent gradient buffer holds the rank's shard
    bool shards_parameters = false;        // the weights themselves: the rank's shard between uses

    // Gradients after backward: stage 0 keeps them whole on every rank.
    constexpr bool all_reduces_gradients() const { return !shards_optimizer_states; }
    // Stage 1: the whole gradient buffer exists and is reduce-scattered once backward is done.
    constexpr bool reduce_scatters_after_backward() const { return shards_optimizer_states && !shards_gradients; }
    // Stages 2-3: each buffer's gradients go through a bucket reduce-scattered during backward.
    constexpr bool reduce_scatters_during_backward() const { return shards_gradients; }
    // Stages 1-2: every rank keeps whole weights, so each rank's updated shard is gathered after the update.
    constexpr bool gathers_weights_after_update() const { return shards_optimizer_states && !shards_parameters; }
    // Stage 3: a buffer's weights are gathered before each use (forward, recompute, backward).
    constexpr bool gathers_weights_before_use() const { return shards_parameters; }
    // The rank updates only the elements of its shard (so partial sums need an all-reduce).
    constexpr bool updates_own_shard_only() const { return shards_optimizer_states; }
    // The gradient buffer is whole but only the rank's shard of it is meaningful after backward (stage 1).
    constexpr bool owned_gradients_inside_whole_buffer() const { return reduce_scatters_after_backward(); }
};

// The plan of a stage. Stages above kMaxZeroStage do not exist; validity
// rules (core/validity.h) refuse them first, so reaching here is a bug.
inline ZeroPlan zero_plan(std::uint32_t stage) {
    if (stage > kMaxZeroStage)
        throw std::invalid_argument("ZeRO stage " + std::to_string(stage) + " does not exist (0-3)");
    return ZeroPlan{stage, stage >= 1, stage >= 1, stage >= 2, stage >= 3};
}

}  // namespace tune
