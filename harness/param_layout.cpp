#include "harness/param_layout.h"

#include <algorithm>
#include <numeric>

namespace tune::harness {

namespace {

std::int64_t round_up(std::int64_t n, std::int64_t a) { return (n + a - 1) / a * a; }

}  // namespace

FlatLayout place_tensors(std::vector<TensorView> tensors, std::int64_t world, std::int64_t alignment) {
    FlatLayout f;
    f.tensors = std::move(tensors);
    for (TensorView& t : f.tensors) {
        t.offset = f.numel;
        f.numel += round_up(t.numel(), alignment);
        if (t.small()) f.small += t.numel();
    }
    f.shard = round_up((f.numel + world - 1) / world, alignment);
    f.padded = world * f.shard;
    return f;
}

ParamLayout make_param_layout(const ModelSpec& m, std::uint32_t world_size, std::uint32_t adam8bit_block) {
    const auto h = static_cast<std::int64_t>(m.hidden), kv = static_cast<std::int64_t>(m.kv_dim());
    const auto f = static_cast<std::int64_t>(m.ffn), v = static_cast<std::int64_t>(m.vocab);
    const std::int64_t world = std::max<std::int64_t>(1, world_size);
    ParamLayout p;
    p.alignment = std::lcm<std::int64_t>(256, std::max<std::int64_t>(1, adam8bit_block));
    p.layers = static_cast<std::int64_t>(m.layers);
    p.layer = place_tensors({{"input_layernorm.weight", 1, h},
                     {"self_attn.q_proj.weight", h, h},
                     {"self_attn.k_proj.weight", kv, h},
                     {"self_attn.v_proj.weight", kv, h},
                     {"self_attn.o_proj.weight", h, h},
                     {"post_attention_layernorm.weight", 1, h},
                     {"mlp.gate_proj.weight", f, h},
                     {"mlp.up_proj.weight", f, h},
                     {"mlp.down_proj.weight", h, f}},
                    world, p.alignment);
    p.outer = place_tensors({{"model.embed_tokens.weight", v, h}, {"model.norm.weight", 1, h}, {"lm_head.weight", v, h}},
                    world, p.alignment);
    return p;
}

std::string tensor_name(const ParamLayout& layout, std::size_t buffer, std::size_t t) {
    const FlatLayout& f = layout.flat(buffer);
    if (buffer == layout.outer_index()) return f.tensors[t].name;
    return "model.layers." + std::to_string(buffer) + "." + f.tensors[t].name;
}

}  // namespace tune::harness
