#!/usr/bin/python3
"""Writes the PyTorch reference fixtures the trainer is checked against.

A tiny Llama in plain torch that computes what Hugging Face transformers'
LlamaForCausalLM computes (RMSNorm, rotate-half RoPE with rope_theta, causal
attention with grouped KV heads, SiLU-gated MLP, no biases, untied head);
and a tiny Qwen3ForCausalLM with every variant the trainer runs beyond it
(modeling_qwen3.Qwen3Attention: biases on q, k, v and o with
attention_bias, q_norm and k_norm over each head before RoPE; head_dim apart
from hidden/heads; tied embeddings; rope_scaling llama3 as
modeling_rope_utils._compute_llama3_parameters computes its frequencies).
For fixed weights and tokens it records the loss, the logits and every
gradient, and the weights after 3 AdamW steps (decoupled weight decay on
matrices only, global grad-norm clipping), in the layout `tune trial --init`
reads. Re-run with:  /usr/bin/python3 scripts/make_torch_fixtures.py
(torch 1.13 CPU; transformers is not needed).

Output (tests/fixtures/torch/llama_tiny/ and qwen3_tiny/, each):
  config.json, model.safetensors   the model, as a Hugging Face folder
  tokens.bin                       little-endian uint32 ids: 3 windows of B*S+1
  reference.safetensors            loss, logits, grad.<name>, step3.<name>, losses
"""
import json
import math
import os
import struct

import torch

CONFIG = dict(vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=2, rms_norm_eps=1e-5, rope_theta=10000.0,
              max_position_embeddings=64)
BATCH, SEQ, STEPS = 2, 16, 3
ADAMW = dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1)
CLIP = 1.0
QWEN3 = dict(vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, head_dim=12, rms_norm_eps=1e-6, rope_theta=10000.0, max_position_embeddings=64,
             attention_bias=True, tie_word_embeddings=True,
             rope_scaling=dict(rope_type="llama3", factor=4.0, low_freq_factor=1.0, high_freq_factor=4.0,
                               original_max_position_embeddings=64))
FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "torch")


def rms_norm(x, w, eps):
    variance = x.pow(2).mean(-1, keepdim=True)
    return w * (x * torch.rsqrt(variance + eps))


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def inv_freq_of(d, c):
    inv_freq = 1.0 / (c["rope_theta"] ** (torch.arange(0, d, 2).float() / d))
    rs = c.get("rope_scaling")
    if not rs:
        return inv_freq
    # llama3: long wavelengths divided by the factor, short ones kept, a smooth blend between.
    factor, low, high = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"]
    old = rs["original_max_position_embeddings"]
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > old / low, inv_freq / factor, inv_freq)
    smooth = (old / wavelen - low) / (high - low)
    blended = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelen < old / high) * ~(wavelen > old / low)
    return torch.where(medium, blended, scaled)


def rope(x, c):
    # x (B, heads, S, D), as LlamaRotaryEmbedding + apply_rotary_pos_emb
    inv_freq = inv_freq_of(x.shape[-1], c)
    freqs = torch.outer(torch.arange(x.shape[2]).float(), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    return x * emb.cos() + rotate_half(x) * emb.sin()


def head_dim(c):
    return c.get("head_dim", c["hidden_size"] // c["num_attention_heads"])


def layer(p, i, x, c):
    b, s, h = x.shape
    heads, kv_heads, d = c["num_attention_heads"], c["num_key_value_heads"], head_dim(c)
    w = lambda n: p[f"model.layers.{i}.{n}"]
    qwen3 = "qwen3" in c.get("model_type", "")

    def linear(x, name):
        y = x @ w(name + ".weight").T
        return y + w(name + ".bias") if c.get("attention_bias") else y

    def project(name, count, norm):
        y = linear(n1, name).view(b, s, count, d)
        if qwen3:  # Qwen3Attention: the norm over each head of the projection, before RoPE
            y = rms_norm(y, w(norm), c["rms_norm_eps"])
        return y.transpose(1, 2)

    n1 = rms_norm(x, w("input_layernorm.weight"), c["rms_norm_eps"])
    q = project("self_attn.q_proj", heads, "self_attn.q_norm.weight")
    k = project("self_attn.k_proj", kv_heads, "self_attn.k_norm.weight")
    v = linear(n1, "self_attn.v_proj").view(b, s, kv_heads, d).transpose(1, 2)
    q, k = rope(q, c), rope(k, c)
    k = k.repeat_interleave(heads // kv_heads, dim=1)  # repeat_kv
    v = v.repeat_interleave(heads // kv_heads, dim=1)
    scores = q @ k.transpose(2, 3) / math.sqrt(d)
    mask = torch.triu(torch.ones(s, s, dtype=torch.bool), diagonal=1)
    probs = torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1)
    o = (probs @ v).transpose(1, 2).reshape(b, s, heads * d)
    x = x + linear(o, "self_attn.o_proj")
    n2 = rms_norm(x, w("post_attention_layernorm.weight"), c["rms_norm_eps"])
    mlp = torch.nn.functional.silu(n2 @ w("mlp.gate_proj.weight").T) * (n2 @ w("mlp.up_proj.weight").T)
    return x + mlp @ w("mlp.down_proj.weight").T


def forward(p, tokens, c):
    x = p["model.embed_tokens.weight"][tokens]
    for i in range(c["num_hidden_layers"]):
        x = layer(p, i, x, c)
    x = rms_norm(x, p["model.norm.weight"], c["rms_norm_eps"])
    head = p["model.embed_tokens.weight"] if c.get("tie_word_embeddings") else p["lm_head.weight"]
    return x @ head.T


def loss_of(p, window, c):
    inputs = window[:-1].view(BATCH, SEQ)
    targets = window[1:].view(BATCH, SEQ)
    logits = forward(p, inputs, c)
    return torch.nn.functional.cross_entropy(logits.reshape(-1, c["vocab_size"]), targets.reshape(-1)), logits


def make_params(c, gen):
    h, f, v = c["hidden_size"], c["intermediate_size"], c["vocab_size"]
    d = head_dim(c)
    q, kv = c["num_attention_heads"] * d, c["num_key_value_heads"] * d
    shapes = {"model.embed_tokens.weight": (v, h)}
    for i in range(c["num_hidden_layers"]):
        pre = f"model.layers.{i}."
        shapes.update({pre + "input_layernorm.weight": (h,), pre + "self_attn.q_proj.weight": (q, h),
                       pre + "self_attn.k_proj.weight": (kv, h), pre + "self_attn.v_proj.weight": (kv, h),
                       pre + "self_attn.o_proj.weight": (h, q), pre + "post_attention_layernorm.weight": (h,),
                       pre + "mlp.gate_proj.weight": (f, h), pre + "mlp.up_proj.weight": (f, h),
                       pre + "mlp.down_proj.weight": (h, f)})
        if c.get("attention_bias"):
            shapes.update({pre + "self_attn.q_proj.bias": (q,), pre + "self_attn.k_proj.bias": (kv,),
                           pre + "self_attn.v_proj.bias": (kv,), pre + "self_attn.o_proj.bias": (h,)})
        if "qwen3" in c.get("model_type", ""):
            shapes.update({pre + "self_attn.q_norm.weight": (d,), pre + "self_attn.k_norm.weight": (d,)})
    shapes["model.norm.weight"] = (h,)
    if not c.get("tie_word_embeddings"):
        shapes["lm_head.weight"] = (v, h)
    params = {}
    for name, shape in shapes.items():
        if name.endswith(".bias"):
            t = 0.1 * torch.randn(shape, generator=gen)
        elif len(shape) == 1:  # norm weights near 1, not exactly, so their gradients matter
            t = 1.0 + 0.1 * torch.randn(shape, generator=gen)
        else:
            t = 0.1 * torch.randn(shape, generator=gen)
        params[name] = t.float().requires_grad_(True)
    return params


def write_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        data = t.detach().contiguous().float().numpy().astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as out:
        out.write(struct.pack("<Q", len(text)))
        out.write(text)
        for blob in blobs:
            out.write(blob)


def write_fixture(name, c):
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1234)
    OUT = os.path.join(FIXTURES, name)
    params = make_params(c, gen)
    tokens = torch.randint(0, c["vocab_size"], (STEPS * BATCH * SEQ + 1,), generator=gen)
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "config.json"), "w") as out:
        json.dump(c, out, indent=2)
    write_safetensors(os.path.join(OUT, "model.safetensors"), params)
    with open(os.path.join(OUT, "tokens.bin"), "wb") as out:
        out.write(struct.pack(f"<{tokens.numel()}I", *tokens.tolist()))

    ref = {}
    window = lambda k: tokens[k * BATCH * SEQ: (k + 1) * BATCH * SEQ + 1]
    loss, logits = loss_of(params, window(0), c)
    loss.backward()
    ref["loss"] = loss.detach().reshape(1)
    ref["logits"] = logits.detach().reshape(-1, c["vocab_size"])
    for name, p in params.items():
        ref["grad." + name] = p.grad.detach().clone()

    # transformers' Trainer.get_decay_parameter_names: no decay on norm weights or biases.
    decay = [p for n, p in params.items() if p.dim() > 1]
    no_decay = [p for n, p in params.items() if p.dim() == 1]
    opt = torch.optim.AdamW([{"params": decay}, {"params": no_decay, "weight_decay": 0.0}], **ADAMW)
    losses = []
    for k in range(STEPS):
        opt.zero_grad()
        loss, _ = loss_of(params, window(k), c)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(params.values()), CLIP)
        opt.step()
        losses.append(loss.item())
    ref["losses"] = torch.tensor(losses)
    for name, p in params.items():
        ref["step3." + name] = p.detach().clone()
    write_safetensors(os.path.join(OUT, "reference.safetensors"), ref)
    print(f"wrote {OUT}: loss {ref['loss'].item():.6f}, losses {losses}")


def main():
    write_fixture("llama_tiny", dict(CONFIG, architectures=["LlamaForCausalLM"], model_type="llama",
                                     tie_word_embeddings=False))
    write_fixture("qwen3_tiny", dict(QWEN3, architectures=["Qwen3ForCausalLM"], model_type="qwen3"))


if __name__ == "__main__":
    main()
