#include "train/param_layout.h"

#include <algorithm>

namespace tune::train {

namespace {

std::int64_t rounded_up(std::int64_t n, std::int64_t a) {
    return static_cast<std::int64_t>(round_up(static_cast<std::uint64_t>(n), static_cast<std::uint64_t>(a)));
}

}  // namespace

FlatLayout place_tensors(std::vector<TensorView> tensors, std::int64_t world, std::int64_t alignment) {
    FlatLayout f;
    f.tensors = std::move(tensors);
    for (TensorView& t : f.tensors) {
        t.offset = f.numel;
        f.numel += rounded_up(t.numel(), alignment);
        if (t.small()) f.small += t.numel();
    }
    f.shard = static_cast<std::int64_t>(shard_numel(
        static_cast<std::uint64_t>(f.numel), static_cast<std::uint64_t>(world), static_cast<std::uint64_t>(alignment)));
    f.padded = world * f.shard;
    return f;
}

namespace {

ParamLayout layout_of(const ModelSpec& m, std::uint32_t shards, std::uint32_t adam8bit_block, OuterParts parts) {
    const auto h = static_cast<std::int64_t>(m.hidden), q = static_cast<std::int64_t>(m.q_dim());
    const auto kv = static_cast<std::int64_t>(m.kv_dim()), d = static_cast<std::int64_t>(m.head_dim());
    const auto f = static_cast<std::int64_t>(m.ffn), v = static_cast<std::int64_t>(m.vocab);
    const std::int64_t world = std::max<std::int64_t>(1, shards);
    ParamLayout p;
    p.alignment = static_cast<std::int64_t>(flat_alignment(adam8bit_block));
    p.layers = static_cast<std::int64_t>(m.layers);
    p.model_layers = p.layers;
    p.slot.fill(-1);
    std::vector<TensorView> tensors;
    auto add = [&](LayerTensor t, const char* name, std::int64_t rows, std::int64_t cols) {
        p.slot[static_cast<std::size_t>(t)] = static_cast<int>(tensors.size());
        tensors.push_back({name, rows, cols});
    };
    add(LayerTensor::attn_norm, "input_layernorm.weight", 1, h);
    add(LayerTensor::q, "self_attn.q_proj.weight", q, h);
    add(LayerTensor::k, "self_attn.k_proj.weight", kv, h);
    add(LayerTensor::v, "self_attn.v_proj.weight", kv, h);
    add(LayerTensor::o, "self_attn.o_proj.weight", h, q);
    add(LayerTensor::mlp_norm, "post_attention_layernorm.weight", 1, h);
    add(LayerTensor::gate, "mlp.gate_proj.weight", f, h);
    add(LayerTensor::up, "mlp.up_proj.weight", f, h);
    add(LayerTensor::down, "mlp.down_proj.weight", h, f);
    if (m.qkv_bias) {
        add(LayerTensor::q_bias, "self_attn.q_proj.bias", 1, q);
        add(LayerTensor::k_bias, "self_attn.k_proj.bias", 1, kv);
        add(LayerTensor::v_bias, "self_attn.v_proj.bias", 1, kv);
    }
    if (m.o_bias) add(LayerTensor::o_bias, "self_attn.o_proj.bias", 1, h);
    if (m.mlp_bias) {
        add(LayerTensor::gate_bias, "mlp.gate_proj.bias", 1, f);
        add(LayerTensor::up_bias, "mlp.up_proj.bias", 1, f);
        add(LayerTensor::down_bias, "mlp.down_proj.bias", 1, h);
    }
    if (m.qk_norm) {
        add(LayerTensor::q_norm, "self_attn.q_norm.weight", 1, d);
        add(LayerTensor::k_norm, "self_attn.k_norm.weight", 1, d);
    }
    p.layer = place_tensors(std::move(tensors), world, p.alignment);
    std::vector<TensorView> outer;
    p.outer_slot.fill(-1);
    const auto add_outer = [&](OuterTensor t, const char* name, std::int64_t rows) {
        p.outer_slot[static_cast<std::size_t>(t)] = static_cast<int>(outer.size());
        outer.push_back({name, rows, h});
    };
    if (parts.embedding) add_outer(OuterTensor::embedding, "model.embed_tokens.weight", v);
    if (parts.head) add_outer(OuterTensor::final_norm, "model.norm.weight", 1);
    // Tied, the embedding serves as the head where the rank holds it; the last stage holds a copy.
    if (parts.head && (!m.tied_embeddings || !parts.embedding)) add_outer(OuterTensor::lm_head, "lm_head.weight", v);
    p.has_outer = !outer.empty();
    p.outer = place_tensors(std::move(outer), world, p.alignment);
    return p;
}

}  // namespace

ParamLayout make_param_layout(const ModelSpec& m, std::uint32_t shards, std::uint32_t adam8bit_block) {
    return layout_of(m, shards, adam8bit_block, OuterParts{});
}

ParamLayout make_stage_layout(const ModelSpec& m, std::uint32_t shards, std::uint32_t adam8bit_block,
                              const PipelineStage& stage) {
    ModelSpec mine = m;
    mine.layers = stage.layers;
    ParamLayout p = layout_of(mine, shards, adam8bit_block, stage.outer());
    for (std::uint32_t l : stage.whole_layers()) p.whole_layers.push_back(l);
    p.model_layers = static_cast<std::int64_t>(m.layers);
    return p;
}

std::int64_t ParamLayout::vector_offset(LayerTensor t) const {
    std::int64_t before = 0;
    for (std::size_t i = 0; i < index(t); ++i)
        if (!layer.tensors[i].matrix()) before += layer.tensors[i].numel();
    return before;
}

std::int64_t ParamLayout::vector_numel() const {
    std::int64_t all = 0;
    for (const TensorView& v : layer.tensors)
        if (!v.matrix()) all += v.numel();
    return all;
}

std::string tensor_name(const ParamLayout& layout, std::size_t buffer, std::size_t t) {
    const FlatLayout& f = layout.flat(buffer);
    if (buffer == layout.outer_index()) return f.tensors[t].name;
    return "model.layers." + std::to_string(layout.whole_index(buffer)) + "." + f.tensors[t].name;
}

ParallelSplit parallel_split(LayerTensor t) {
    switch (t) {
        case LayerTensor::q:
        case LayerTensor::k:
        case LayerTensor::v:
        case LayerTensor::gate:
        case LayerTensor::up:
            return ParallelSplit::rows;
        case LayerTensor::o:
        case LayerTensor::down:
        case LayerTensor::q_bias:  // a bias is one row: a column-parallel linear's splits its columns
        case LayerTensor::k_bias:
        case LayerTensor::v_bias:
        case LayerTensor::gate_bias:
        case LayerTensor::up_bias:
            return ParallelSplit::columns;
        default:
            return ParallelSplit::none;
    }
}

bool kv_tensor(LayerTensor t) {
    return t == LayerTensor::k || t == LayerTensor::v || t == LayerTensor::k_bias || t == LayerTensor::v_bias;
}

TensorSource split_source(const TensorView& whole, const TensorView& mine, ParallelSplit split, std::uint32_t index) {
    TensorSource s{whole.offset, whole.rows, whole.cols, 0, 0, split == ParallelSplit::none};
    if (split == ParallelSplit::rows) s.row_begin = index * mine.rows;
    if (split == ParallelSplit::columns) s.col_begin = index * mine.cols;
    return s;
}

LayoutSource tensor_parallel_source(const ModelSpec& whole, const ParamLayout& local, ParallelRank at,
                                    std::uint32_t adam8bit_block) {
    const ParamLayout all = make_param_layout(whole, 1, adam8bit_block);
    LayoutSource out(local.buffers());
    for (std::size_t i = 0; i < local.buffers(); ++i) {
        const FlatLayout& f = local.flat(i);
        const bool outer = i == local.outer_index();
        for (std::size_t t = 0; t < f.tensors.size(); ++t) {
            // The outer buffer: the embedding and LM head split by vocabulary rows, the final norm whole.
            const LayerTensor kind = local.layer_tensor(t);
            const ParallelSplit split =
                outer ? (local.has(OuterTensor::final_norm) && t == local.index(OuterTensor::final_norm)
                             ? ParallelSplit::none
                             : ParallelSplit::rows)
                      : parallel_split(kind);
            const std::uint32_t index = !outer && kv_tensor(kind) ? at.kv_shard : at.rank;
            out[i].push_back(split_source(all.flat(i).tensors[t], f.tensors[t], split, index));
        }
    }
    return out;
}

LayoutSource identity_source(const ParamLayout& layout) {
    LayoutSource out(layout.buffers());
    for (std::size_t i = 0; i < layout.buffers(); ++i)
        for (const TensorView& t : layout.flat(i).tensors) out[i].push_back({t.offset, t.rows, t.cols, 0, 0, true});
    return out;
}

LayoutSource stage_source(const LayoutSource& all_source, const ParamLayout& all, const ParamLayout& stage) {
    LayoutSource out(stage.buffers());
    for (std::size_t i = 0; i < static_cast<std::size_t>(stage.layers); ++i) out[i] = all_source[stage.whole_index(i)];
    if (!stage.has_outer) return out;
    out[stage.outer_index()].resize(stage.outer.tensors.size());
    for (OuterTensor t : {OuterTensor::embedding, OuterTensor::final_norm, OuterTensor::lm_head}) {
        if (!stage.has(t)) continue;
        const OuterTensor from = all.has(t) ? t : OuterTensor::embedding;  // tied: the head copies the embedding
        out[stage.outer_index()][stage.index(t)] = all_source[all.outer_index()][all.index(from)];
    }
    return out;
}

}  // namespace tune::train
