// Where every parameter tensor lives: L + 1 flat buffers (one per layer, one
// "outer" buffer for the embedding, final norm and LM head), each a sequence
// of slots aligned to A = lcm(256, adam8bit_block) elements, a tensor at the
// start of its slot, and each buffer padded to equal shards
// (docs/memory-model.md §1). ZeRO shards, gathers and reduce-scatters act on
// whole flat buffers; 8-bit blocks never straddle a slot or a shard.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/flat_buffer.h"
#include "core/pipeline_stages.h"

namespace tune::train {

// Tensors smaller than this keep full-width 8-bit Adam state (core/flat_buffer.h).
inline constexpr auto kSmallTensor = static_cast<std::int64_t>(kSmallTensorElements);

// Slot order inside the buffers. The nine Llama tensors are always there, in
// this order; the biases and q/k norms follow, in this order, where the model
// has them (ParamLayout::has, ::index). The LM head is absent with tied
// embeddings: the embedding serves as the head (ParamLayout::head).
enum class LayerTensor : std::uint8_t {
    attn_norm,
    q,
    k,
    v,
    o,
    mlp_norm,
    gate,
    up,
    down,
    q_bias,
    k_bias,
    v_bias,
    o_bias,
    gate_bias,
    up_bias,
    down_bias,
    q_norm,
    k_norm
};
inline constexpr std::size_t kLayerTensorKinds = 18;
enum class OuterTensor : std::uint8_t { embedding, final_norm, lm_head };

struct TensorView {
    std::string name;       // Hugging Face name within its scope, e.g. "self_attn.q_proj.weight"
    std::int64_t rows = 0;  // (rows, cols) row-major as nn.Linear stores it; vectors: rows = 1
    std::int64_t cols = 0;
    std::int64_t offset = 0;                  // elements from the start of the flat buffer (a multiple of A)
    bool matrix() const { return rows > 1; }  // matrices decay, norm weights and biases do not
    bool bias() const { return name.ends_with(".bias"); }
    // A vector's value before training: biases 0, norm weights 1 (as transformers initializes them).
    float initial_vector_value() const { return bias() ? 0.0f : 1.0f; }
    std::int64_t numel() const { return rows * cols; }
    bool small() const { return numel() < kSmallTensor; }
};

struct FlatLayout {
    std::vector<TensorView> tensors;
    std::int64_t numel = 0;   // sum of the slots
    std::int64_t shard = 0;   // elements each rank owns
    std::int64_t padded = 0;  // shards * shard
    std::int64_t small = 0;   // total numel of the small tensors
};

struct ParamLayout {
    FlatLayout layer;  // the same for every layer
    FlatLayout outer;
    // Index into layer.tensors of each LayerTensor, or -1 where the model has none.
    std::array<int, kLayerTensorKinds> slot{};
    std::int64_t layers = 0;
    std::int64_t alignment = 256;
    // LoRA's adapters have layer buffers only: the embedding, final norm and head stay frozen; so has a
    // pipeline stage between the first and the last.
    bool has_outer = true;
    // Index into outer.tensors of each OuterTensor, or -1 where the rank holds none (a pipeline stage holds
    // the embedding on the first stage, the final norm and head on the last).
    std::array<int, 3> outer_slot{0, 1, 2};
    // The whole model's index of each layer buffer (a pipeline stage's layers); empty: buffer i is layer i.
    std::vector<std::int64_t> whole_layers;
    std::int64_t model_layers = 0;  // the whole model's layers

    std::size_t buffers() const { return static_cast<std::size_t>(layers) + (has_outer ? 1 : 0); }
    // Buffer index: layers first, the outer buffer last.
    std::size_t outer_index() const { return static_cast<std::size_t>(layers); }
    const FlatLayout& flat(std::size_t buffer) const { return buffer == outer_index() ? outer : layer; }
    bool has(LayerTensor t) const { return slot[static_cast<std::size_t>(t)] >= 0; }
    std::size_t index(LayerTensor t) const { return static_cast<std::size_t>(slot[static_cast<std::size_t>(t)]); }
    const TensorView& at(LayerTensor t) const { return layer.tensors[index(t)]; }
    // Which tensor a layer buffer's index holds (the inverse of index()).
    LayerTensor layer_tensor(std::size_t i) const {
        const auto* it = std::find(slot.begin(), slot.end(), static_cast<int>(i));
        return static_cast<LayerTensor>(it - slot.begin());
    }
    bool has(OuterTensor t) const { return outer_slot[static_cast<std::size_t>(t)] >= 0; }
    std::size_t index(OuterTensor t) const { return static_cast<std::size_t>(outer_slot[static_cast<std::size_t>(t)]); }
    // The matrix the LM head multiplies by: lm_head, or the embedding when tied (on the stage holding both).
    OuterTensor head() const { return has(OuterTensor::lm_head) ? OuterTensor::lm_head : OuterTensor::embedding; }
    const TensorView& at(OuterTensor t) const { return outer.tensors[index(t)]; }
    // The whole model's buffer index of buffer i: its layer's, or the whole's outer index (its layer count).
    std::size_t whole_index(std::size_t i) const {
        if (i == outer_index()) return static_cast<std::size_t>(model_layers);
        return whole_layers.empty() ? i : static_cast<std::size_t>(whole_layers[i]);
    }
    // Elements of a layer's vectors (norm weights, biases) before t's, in slot order:
    // where t starts in QLoRA's separately kept vectors (train/qlora_base.h).
    std::int64_t vector_offset(LayerTensor t) const;
    std::int64_t vector_numel() const;  // all of a layer's vectors
    std::int64_t padded_total() const { return layers * layer.padded + outer.padded; }
};

// Tensors placed in slots of `alignment` elements, padded to `world` equal shards.
FlatLayout place_tensors(std::vector<TensorView> tensors, std::int64_t world, std::int64_t alignment);

ParamLayout make_param_layout(const ModelSpec& model, std::uint32_t shards, std::uint32_t adam8bit_block);
// A pipeline stage's: its layers (model.layers of them, the whole model's `whole_layers`, of `model_layers`)
// and its parts of the outer buffer.
ParamLayout make_stage_layout(const ModelSpec& model, std::uint32_t shards, std::uint32_t adam8bit_block,
                              const PipelineStage& stage);

// Where a tensor-parallel rank's tensor comes from in the whole model (core/parallel_plan.h):
// element (r, c) of the rank's tensor is element (row_begin + r, col_begin + c) of the whole
// tensor at `offset` of the whole model's layout, which has `rows` x `cols`; rows past `rows`
// (the vocabulary's padding) have none. A tensor every rank holds whole is `replicated`.
struct TensorSource {
    std::int64_t offset = 0, rows = 0, cols = 0;
    std::int64_t row_begin = 0, col_begin = 0;
    bool replicated = true;
};
// A tensor-parallel rank's place in its group: its rank, and the KV heads' shard it holds (the rank
// divided by the ranks that replicate one KV head, core/parallel_plan.h).
struct ParallelRank {
    std::uint32_t rank = 0;
    std::uint32_t kv_shard = 0;
};
// Per buffer, per tensor of `local` (make_param_layout of ParallelPlan::local), for tensor-parallel
// rank `at`: column-parallel q, k, v, gate, up (and their biases) by rows, k's and v's by the KV shard,
// row-parallel o and down by columns, the embedding and LM head by vocabulary rows; norms and o's and
// down's biases whole.
using LayoutSource = std::vector<std::vector<TensorSource>>;
// How Megatron splits a layer tensor over the tensor-parallel ranks: column-parallel q, k, v, gate, up
// (and their biases) by rows, row-parallel o and down by columns, the rest not at all.
enum class ParallelSplit : std::uint8_t { none, rows, columns };
ParallelSplit parallel_split(LayerTensor t);
// k's and v's weights and biases: split by KV head, so replicated where ranks share one.
bool kv_tensor(LayerTensor t);
// Where the `index`-th shard `mine`, split `split`, comes from in `whole`.
TensorSource split_source(const TensorView& whole, const TensorView& mine, ParallelSplit split, std::uint32_t index);
LayoutSource tensor_parallel_source(const ModelSpec& whole, const ParamLayout& local, ParallelRank at,
                                    std::uint32_t adam8bit_block);
// Each tensor its own source: a layout that is the whole model's.
LayoutSource identity_source(const ParamLayout& layout);
// A pipeline stage's tensors from `all`'s source (the rank's layout with every layer and the whole outer
// buffer): its layer buffers the whole's layers, its outer tensors the whole's of the same kind (a tied
// model's head copy comes from the embedding).
LayoutSource stage_source(const LayoutSource& all_source, const ParamLayout& all, const ParamLayout& stage);

// The full Hugging Face name of tensor `t` of buffer `buffer`:
// "model.layers.3.self_attn.q_proj.weight", "lm_head.weight".
std::string tensor_name(const ParamLayout& layout, std::size_t buffer, std::size_t t);

}  // namespace tune::train
