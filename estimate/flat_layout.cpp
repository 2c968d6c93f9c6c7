#include "estimate/flat_layout.h"

#include <algorithm>

#include "core/peft_modules.h"

namespace tune {
namespace {

// Accumulates one tensor's contribution to a buffer.
struct BufferBuilder {
    std::uint64_t align;
    BufferKind kind{};

    void matrix(std::uint64_t rows, std::uint64_t cols) {
        add(rows * cols, rows + cols);
        kind.sums += rows + cols;
    }
    void vector(std::uint64_t n) { add(n, n); }

    void add(std::uint64_t numel, std::uint64_t stats) {
        kind.numel += round_up(numel, align);
        if (numel < kSmallTensorElements) kind.small += numel;
        kind.stats += stats;
        kind.max_tensor = std::max(kind.max_tensor, numel);
        kind.tensors += 1;
        kind.sums += 3;  // the tensor's sum of p^2, sum of update^2, mean row statistic
    }
};

}  // namespace

FlatLayout flat_layout(const ModelSpec& m, std::uint32_t adam8bit_block, OuterParts parts) {
    const std::uint64_t align = flat_alignment(adam8bit_block);
    const std::uint64_t h = m.hidden, q = m.q_dim(), kv = m.kv_dim(), f = m.ffn, v = m.vocab;

    BufferBuilder layer{align};
    layer.vector(h);      // attn_norm
    layer.matrix(q, h);   // q
    layer.matrix(kv, h);  // k
    layer.matrix(kv, h);  // v
    layer.matrix(h, q);   // o
    layer.vector(h);      // mlp_norm
    layer.matrix(f, h);   // gate
    layer.matrix(f, h);   // up
    layer.matrix(h, f);   // down
    // Hugging Face biases (Qwen2's q, k, v; attention_bias, mlp_bias) and Qwen3's q/k norms,
    // in train/param_layout's order.
    if (m.qkv_bias) {
        layer.vector(q);
        layer.vector(kv);
        layer.vector(kv);
    }
    if (m.o_bias) layer.vector(h);
    if (m.mlp_bias) {
        layer.vector(f);
        layer.vector(f);
        layer.vector(h);
    }
    if (m.qk_norm) {
        layer.vector(m.head_dim());
        layer.vector(m.head_dim());
    }
    layer.kind.count = m.layers;

    BufferBuilder outer{align};
    if (parts.embedding) outer.matrix(v, h);  // embedding
    if (parts.head) outer.vector(h);          // final_norm
    // lm_head; tied, the embedding serves where the stage holds it
    if (parts.head && (!m.tied_embeddings || !parts.embedding)) outer.matrix(v, h);
    outer.kind.count = parts.embedding || parts.head ? 1 : 0;

    return FlatLayout{align, layer.kind, outer.kind};
}

BufferKind adapter_buffer(const ModelSpec& m, std::uint32_t rank, LoraTargets targets, std::uint32_t adam8bit_block) {
    const std::uint64_t h = m.hidden, q = m.q_dim(), kv = m.kv_dim(), f = m.ffn, r = rank;
    BufferBuilder b{flat_alignment(adam8bit_block)};
    auto linear = [&](std::uint64_t out, std::uint64_t in) {
        if (r > 1)
            b.matrix(r, in);  // A; a (1, in) A is a vector to the optimizers
        else
            b.vector(in);
        b.matrix(out, r);  // B
    };
    // (out, in) of each linear in core/peft_modules.h's order: q, k, v, o, gate, up, down.
    const std::uint64_t shapes[7][2] = {{q, h}, {kv, h}, {kv, h}, {h, q}, {f, h}, {f, h}, {h, f}};
    for (std::size_t i = 0; i < 7; ++i)
        if (lora_adapts(targets, i)) linear(shapes[i][0], shapes[i][1]);
    b.kind.count = m.layers;
    return b.kind;
}

}  // namespace tune
