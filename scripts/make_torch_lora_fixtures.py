#!/usr/bin/python3
"""Writes the PyTorch LoRA reference the trainer's adapters are checked against.

The tiny GQA Llama of make_torch_fixtures.py (same weights, same tokens),
frozen, with LoRA adapters (Hu et al. 2021, as PEFT computes them) on every
linear of every layer: y = x W^T + (alpha / r) (x A^T) B^T, A (r, in), B
(out, r). The adapters start from given non-zero values (B non-zero too, so
A's gradient is not zero) and are written as a PEFT adapter folder. Records
the loss, every adapter gradient, and the adapters after 3 AdamW steps
(decoupled weight decay, global grad-norm clipping over the adapters).
Re-run with:  /usr/bin/python3 scripts/make_torch_lora_fixtures.py

Output (tests/fixtures/torch/llama_tiny_lora/):
  adapter_config.json, adapter_model.safetensors   the adapters, as PEFT saves them
  reference.safetensors   loss, losses, grad.<name>, step3.<name> (names without "base_model.model.")
"""
import json
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_torch_fixtures as base  # noqa: E402

RANK, ALPHA = 4, 8.0
TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "torch", "llama_tiny_lora")
PEFT_PREFIX = "base_model.model."


def module_of(weight_name):
    for t in TARGETS:
        if weight_name.endswith(t + ".weight"):
            return weight_name[: -len(".weight")]
    return None


def make_adapters(params, gen):
    adapters = {}
    for name, w in params.items():
        module = module_of(name)
        if module is None:
            continue
        out_f, in_f = w.shape
        adapters[module + ".lora_A.weight"] = (0.2 * torch.randn((RANK, in_f), generator=gen)).requires_grad_(True)
        adapters[module + ".lora_B.weight"] = (0.2 * torch.randn((out_f, RANK), generator=gen)).requires_grad_(True)
    return adapters


def lora_params(params, adapters):
    """The effective weights W + s B A: the same function of x as W x + s B (A x), and its
    gradient with respect to A and B is the same (autograd goes through the product)."""
    scale = ALPHA / RANK
    out = {}
    for name, w in params.items():
        module = module_of(name)
        if module is None:
            out[name] = w
        else:
            out[name] = w + scale * adapters[module + ".lora_B.weight"] @ adapters[module + ".lora_A.weight"]
    return out


def main():
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1234)
    c = base.CONFIG
    params = {n: p.detach() for n, p in base.make_params(c, gen).items()}  # frozen
    tokens = torch.randint(0, c["vocab_size"], (base.STEPS * base.BATCH * base.SEQ + 1,), generator=gen)
    adapters = make_adapters(params, torch.Generator().manual_seed(4321))
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "adapter_config.json"), "w") as out:
        json.dump({"peft_type": "LORA", "task_type": "CAUSAL_LM", "r": RANK, "lora_alpha": ALPHA,
                   "lora_dropout": 0.0, "bias": "none", "target_modules": TARGETS, "fan_in_fan_out": False,
                   "base_model_name_or_path": "llama_tiny"}, out, indent=2)
    base.write_safetensors(os.path.join(OUT, "adapter_model.safetensors"),
                           {PEFT_PREFIX + n: t for n, t in adapters.items()})

    window = lambda k: tokens[k * base.BATCH * base.SEQ: (k + 1) * base.BATCH * base.SEQ + 1]
    ref = {}
    loss, _ = base.loss_of(lora_params(params, adapters), window(0), c)
    loss.backward()
    ref["loss"] = loss.detach().reshape(1)
    for name, a in adapters.items():
        ref["grad." + name] = a.grad.detach().clone()

    opt = torch.optim.AdamW(list(adapters.values()), **base.ADAMW)
    losses = []
    for k in range(base.STEPS):
        opt.zero_grad()
        loss, _ = base.loss_of(lora_params(params, adapters), window(k), c)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(adapters.values()), base.CLIP)
        opt.step()
        losses.append(loss.item())
    ref["losses"] = torch.tensor(losses)
    for name, a in adapters.items():
        ref["step3." + name] = a.detach().clone()
    base.write_safetensors(os.path.join(OUT, "reference.safetensors"), ref)
    print(f"wrote {OUT}: loss {ref['loss'].item():.6f}, losses {losses}")


if __name__ == "__main__":
    main()
