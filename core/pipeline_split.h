// How a pipeline's layers divide over its virtual stages (p x v of them, in
// virtual-stage order: stage s's chunk c is virtual stage c p + s). Even: L / (p v)
// each. Megatron-LM counts the embedding (and the loss) as a layer where asked
// (--account-for-embedding-in-pipeline-split, --account-for-loss-in-pipeline-split,
// megatron/core/transformer/transformer_block.py get_num_layers_to_build): the
// first (last) virtual stage then holds one layer less, so L + 1 (or L + 2) must
// divide by p v. The first stage holds the embedding, the last the final norm,
// head and loss, whatever the split.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/config.h"

namespace tune {

// Whether the split counts the embedding (first virtual stage) or the loss (last) as a layer.
bool split_counts_embedding(PipelineSplit split);
bool split_counts_loss(PipelineSplit split);
// A virtual stage's counted layers (L plus the counted embedding and loss, over p v): what Megatron's
// --num-layers-per-virtual-pipeline-stage and torchtitan's pipeline_parallel_layers_per_stage take.
std::uint32_t pipeline_counted_layers(std::uint32_t layers, std::uint32_t stages, std::uint32_t virtual_stages,
                                      PipelineSplit split);

// Why the layers cannot divide so; nullopt when they can.
std::optional<std::string> pipeline_split_problem(std::uint32_t layers, std::uint32_t stages,
                                                  std::uint32_t virtual_stages, PipelineSplit split);
// (p v) layers of each virtual stage; std::invalid_argument naming the problem where there is one.
std::vector<std::uint32_t> pipeline_layers(std::uint32_t layers, std::uint32_t stages, std::uint32_t virtual_stages,
                                           PipelineSplit split);
// The first layer of virtual stage g.
std::uint32_t pipeline_first_layer(const std::vector<std::uint32_t>& layers, std::uint32_t g);

}  // namespace tune
