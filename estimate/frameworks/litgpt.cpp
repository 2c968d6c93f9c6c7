// What LitGPT (its own GPT model, fused qkv, finetune/lora.py under Lightning
// Fabric) holds beyond our engine.
#include <algorithm>

#include <fmt/format.h>

#include "core/parallel_plan.h"
#include "estimate/frameworks/eager_ops.h"
#include "estimate/frameworks/framework_profile.h"
#include "estimate/model_flops.h"
#include "kernels/math/nf4.h"

namespace tune {

namespace {

constexpr std::uint64_t kHeadChunkTokens = 128;  // finetune/lora.py: model(input_ids, lm_head_chunk_size=128)

std::uint64_t tokens_of(const TrialConfig& c) { return std::uint64_t{c.micro_batch} * c.context; }

// Lightning's _FabricModule.forward passes the output through the precision
// plugin's convert_output, which casts floating tensors to the default dtype,
// fp32, once the forward's dtype context has exited; the loop's `logits` holds
// that list until the next step's forward returns. Two moments compete:
//   end of forward: the previous step's fp32 list, this step's 16-bit list and
//     its fp32 copy, and the previous step's kept 4-bit inputs (`held`);
//   head backward, finetune/lora.py (the head in 128-token chunks): the fp32
//     list, chunked_cross_entropy's fp32 log-softmax outputs (F.cross_entropy
//     saves them), and one chunk's gradients (fp32 output and input, then 16 bits);
//   head backward, finetune/full.py (model(input_ids): the head whole, then
//     logits[..., :-1, :] split into 128-row chunks): the fp32 logits, every
//     chunk's gradient held until SplitBackward concatenates them, and the
//     concatenation; then the concatenation beside the slice's whole-size gradient.
FrameworkTerm logits_term(const TrialConfig& c, const StepMemory& engine, std::uint64_t held) {
    const ModelSpec& m = c.model;
    const std::uint64_t logits = tokens_of(c) * m.vocab;
    const std::uint64_t chunk = std::uint64_t{c.micro_batch} * std::min<std::uint64_t>(kHeadChunkTokens, c.context);
    const std::uint64_t wb = weight_bytes(c.precision);
    const std::uint64_t forward_end = (4 + wb + 4) * logits + held;
    const std::uint64_t head_backward =
        c.adapters() ? (4 + 4) * logits + (4 + 4 + wb) * chunk * m.vocab : (4 + 4 + 4) * logits;
    const bool at_forward_end = forward_end > head_backward;
    FrameworkTerm t{fmt::format("fp32 logits of the whole sequence ({} x {}), at the {}", tokens_of(c), m.vocab,
                                at_forward_end ? "end of forward, beside the previous step's" : "head's backward"),
                    static_cast<std::int64_t>(std::max(forward_end, head_backward)) -
                        static_cast<std::int64_t>(engine.at(Phase::head_backward)[Component::logits]),
                    {}};
    t.alive[static_cast<std::size_t>(Phase::head_backward)] = true;
    return t;
}

// QLoRA's LM head. Lightning's BitsandbytesPrecision swaps every nn.Linear for
// a 4-bit one, the head included (our engine keeps it in 16 bits), and
// quantizes from fp16 (_NF4Linear.quantize_ casts with .half()), so each chunk
// dequantizes the head to fp16 and casts that to the data's dtype: two 16-bit
// copies at once, where our engine dequantizes its largest layer weight.
std::vector<FrameworkTerm> quantized_head_terms(const TrialConfig& c) {
    const ModelSpec& m = c.model;
    const std::uint64_t head = m.vocab * m.hidden;
    const std::uint64_t wb = weight_bytes(c.precision);
    const std::uint64_t largest = std::max({m.q_dim() * m.hidden, m.kv_dim() * m.hidden, m.ffn * m.hidden});
    const auto nf4 = static_cast<std::uint64_t>(math::nf4_sizes(static_cast<std::int64_t>(head)).bytes);
    FrameworkTerm stored{"the LM head in NF4, not 16 bits",
                         static_cast<std::int64_t>(nf4) - static_cast<std::int64_t>(wb * head), kWholeStep};
    FrameworkTerm copies{"the LM head dequantized to fp16, then cast (two 16-bit copies)",
                         static_cast<std::int64_t>(4 * head) - static_cast<std::int64_t>(wb * largest),
                         {}};
    copies.alive[static_cast<std::size_t>(Phase::head_backward)] = true;
    return {stored, copies};
}

}  // namespace

// LitGPT's GPT (litgpt/model.py and lora.py at e5493986; the RMSNorm upcast is
// there since lit-gpt 6178c7cc), bytes one layer keeps per token for backward.
// PyTorch's mm keeps its input only for a trainable weight
// (tools/autograd/gen_variable_type.py guard_for), so a frozen linear keeps nothing.
//   RMSNorm.forward: x.float(), which x * x and x * rsqrt keep, and the fp32 rsqrt;
//     a trainable weight keeps x_normed (fp32) too, and the linears after it their input.
//   LoRAQKVLinear.forward: one dropout over the shared input, then F.linear keeps
//     what lora_A reads: with a dropout, its byte of mask and the dropped-out copy;
//     without (LoRALayer's identity), the normed input itself. zero_pad's index_copy
//     keeps its source, the adapted widths, unless q, k and v all have adapters; the
//     conv1d keeps x A^T. LoRALinear: the same per adapted linear, whose inputs
//     without a dropout are SDPA's output (kept already), the MLP's normed input
//     (shared by fc_1 and fc_2) and the gated product.
//   CausalSelfAttention.forward: q and k after torch.cat (k copied to every query
//     head with grouped KV heads), and v: with grouped heads a copy per query
//     head, otherwise a view of the fused qkv output, whose whole storage SDPA
//     then keeps; SDPA keeps its output and log-sum-exp (as our engine does).
//   LLaMAMLP.forward: silu keeps fc_1's output, the product keeps silu's and
//     fc_2's; a trainable proj keeps the product.
double litgpt_layer_saved_per_token(const TrialConfig& c, double lora_dropout) {
    const ModelSpec m = parallel_plan(c).local(c.model);
    const double s = weight_bytes(c.precision);
    const double h = static_cast<double>(m.hidden), q = static_cast<double>(m.q_dim());
    const double kv = static_cast<double>(m.kv_dim()), f = static_cast<double>(m.ffn);
    const bool full = !c.adapters(), grouped = m.kv_heads != m.heads, dropout = lora_dropout > 0;
    const double norm = 4 * h + 4 + (full ? 4 * h + s * h : 0.0);
    const std::vector<Linear> linears = layer_linears(m, c);
    const auto adapted = [&](std::size_t i) { return linears[i].rank > 0; };
    double lora = 0, adapted_qkv = 0;
    for (std::size_t i = 0; i < linears.size(); ++i) {
        if (!adapted(i)) continue;
        lora += s * linears[i].rank;  // x A^T
        if (i < 3)
            adapted_qkv += linears[i].out;
        else if (dropout)
            lora += (1 + s) * linears[i].in;
    }
    if (adapted_qkv > 0) {
        const bool all_qkv = adapted(0) && adapted(1) && adapted(2);
        lora += (dropout ? 1 + s : s) * h + (all_qkv ? 0.0 : s * adapted_qkv);
    }
    if (!dropout) lora += (adapted(4) || adapted(5) ? s * h : 0.0) + (adapted(6) ? s * f : 0.0);
    const double attention = 2 * s * q + s * (grouped ? q : kv) + s * (grouped ? q : q + 2 * kv);
    const double mlp = 3 * s * f + (full ? s * f : 0.0);
    return 2 * norm + lora + attention + mlp;
}

namespace {

// What LitGPT's layers keep beyond our engine's (litgpt_layer_saved_per_token
// against layer_saved_tensors; the attention's statistics are the same in
// both): all layers without checkpointing, the one recomputed with
// FSDPStrategy's activation_checkpointing_policy={Block}. Under LoRA the
// frozen embedding's output needs no gradient, so the first layer's norm keeps nothing.
FrameworkTerm saved_tensors_term(const TrialConfig& c, double lora_dropout) {
    const std::uint64_t tokens = tokens_of(c);
    std::int64_t engine = 0, attention = 0;
    for (const SavedTensor& t : layer_saved_tensors(c.model, c).view()) {
        engine += static_cast<std::int64_t>(t.bytes);
        if (t.name == "attention") attention = static_cast<std::int64_t>(t.bytes);
    }
    const auto litgpt =
        static_cast<std::int64_t>(litgpt_layer_saved_per_token(c, lora_dropout) * static_cast<double>(tokens)) +
        attention;
    const bool whole = c.checkpointing == Checkpointing::none;
    const std::int64_t layers = whole ? static_cast<std::int64_t>(c.model.layers) : 1;
    const std::int64_t first_norm =
        whole && c.adapters() ? static_cast<std::int64_t>((4 * c.model.hidden + 4) * tokens) : 0;
    FrameworkTerm t{fmt::format("LitGPT's saved tensors beyond ours ({} layer{} x {} tokens): the fp32 norm inputs, "
                                "LoRA's inputs and padded output, the fused qkv output v views",
                                layers, layers == 1 ? "" : "s", tokens),
                    layers * (litgpt - engine) - first_norm,
                    {}};
    t.alive[static_cast<std::size_t>(Phase::forward)] = t.alive[static_cast<std::size_t>(Phase::layer_backward)] = true;
    t.alive[static_cast<std::size_t>(Phase::head_backward)] = whole;
    return t;
}

}  // namespace

std::vector<FrameworkTerm> litgpt_terms(const TrialConfig& c, const EstimateOptions& o, const StepMemory& engine) {
    std::vector<FrameworkTerm> terms;
    // Under FSDP, finetune/lora.py loads the checkpoint as a full state dict on
    // every rank (Lightning's FSDPStrategy, state_dict_type "full"), and the
    // reported torch.cuda.max_memory_allocated() is never reset: the whole
    // unsharded model counts beside the rank's shard.
    if (c.zero_stage == 3 && parallel_plan(c).world() > 1)
        terms.push_back({"the unsharded model of the full-state-dict load, beside the shard",
                         static_cast<std::int64_t>(c.model.param_count() * weight_bytes(c.precision)), kWholeStep});
    terms.push_back(saved_tensors_term(c, o.lora_dropout));
    // The loop's `logits` keeps the step's graph, and the 4-bit inputs on its
    // ctx, until the next step's forward returns. The output projection's input
    // is SDPA's output reshaped (a view): only the norms' outputs and the gated
    // product are new.
    const FrameworkTerm kept =
        bnb_kept_inputs(c, o.libraries, {.held_to_next_step = true, .attention_output_copied = false});
    terms.push_back(logits_term(c, engine, static_cast<std::uint64_t>(kept.bytes)));
    if (kept.bytes > 0) terms.push_back(kept);
    if (c.method == Method::qlora && !c.model.tied_embeddings)
        for (FrameworkTerm& t : quantized_head_terms(c)) terms.push_back(std::move(t));
    return terms;
}

// LitGPT's model (litgpt/model.py at e5493986): Block.forward's two RMSNorms
// (weighted in fp32, then cast back) and residual sums. CausalSelfAttention.forward
// splits the fused qkv output's permuted view; with grouped KV heads the reshapes
// copy q, and k and v expanded to every query head; apply_rope runs on q and k at
// those widths with cos and sin in fp32 (build_rope_cache), which promotes bf16
// products to fp32, and torch.cat re-joins each with its unroped part (a copy).
// SDPA writes its output token-major, so the reshape after its transpose is a
// view. LLaMAMLP is F.silu(fc_1(x)) * fc_2(x). litgpt/lora.py LoRALinear.forward
// drops out the input when lora_dropout > 0 (0.05 in config_hub: a byte of mask
// per element), scales the adapters' output and adds it to the base output (counted
// per adapted linear, though q, k, v's share one dropout). The loss: Fabric casts
// the logits to fp32 (convert_output), and chunked_cross_entropy runs
// cross_entropy on them.
EagerTraffic litgpt_eager(const TrialConfig& c, double lora_dropout) {
    const EagerWidths w = eager_widths(c);
    const double s = weight_bytes(c.precision);
    const double k = w.grouped_kv ? w.q : w.kv;  // the width k has at RoPE
    double lora = 0;
    for (const Linear& l : layer_linears(parallel_plan(c).local(c.model), c))
        if (l.rank > 0) lora += (lora_dropout > 0 ? (2 * s + 1) * l.in : 0.0) + 5 * s * l.out;
    EagerTraffic t;
    t.layer_forward = 2 * eager::rmsnorm_fp32_weight(s) * w.hidden +
                      (w.grouped_kv ? eager::copy(s) * w.q + 2 * s * (w.kv + w.q) : 0.0) +
                      (eager::rotate_half_rope(s, 4) + eager::copy(s)) * (w.q + k) + eager::swiglu(s) * w.ffn +
                      2 * eager::residual_add(s, s) * w.hidden + lora;
    t.outer_forward = eager::rmsnorm_fp32_weight(s) * w.hidden;
    t.loss_whole = eager::upcast_cross_entropy(s) * w.vocab;
    return t;
}

}  // namespace tune
