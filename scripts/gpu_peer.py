#!/usr/bin/env python3
"""PyTorch's side of scripts/gpu-peer.sh: timed training steps of a Llama in
transformers, the configuration tune's trial runs, in one process per call.

  gpu_peer.py --model llama-7b --precision bf16 --micro-batch 2 --context 2048 \
      --checkpointing full --sdpa cudnn --steps 6 --warmup 2

The model is LlamaForCausalLM from a LlamaConfig with random weights and
attn_implementation="sdpa" under one SDPA backend (cudnn or flash). The
optimizer is torch.optim.AdamW(fused=True). Precision is bf16 (weights,
gradients and states in bf16) or bf16-mixed (fp32 weights under autocast).
Checkpointing is none or full (gradient_checkpointing_enable). Steps are timed
with CUDA events; the median of the steps after warm-up is reported.

Prints one JSON line: tokens_per_s, step_ms, max_memory_allocated,
max_memory_reserved and device_used (the device's used bytes after the steps,
as nvidia-smi shows them). With --dry-run it prints the configuration it would
build and imports nothing from torch.
"""
import argparse
import json
import statistics
import sys

# The presets gpu-peer.sh runs (tune presets: hidden, layers, heads, kv heads, ffn, vocab).
MODELS = {
    "llama-7b": dict(hidden_size=4096, num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=32,
                     intermediate_size=11008, vocab_size=32000),
    "llama3.2-1b": dict(hidden_size=2048, num_hidden_layers=16, num_attention_heads=32, num_key_value_heads=8,
                        intermediate_size=8192, vocab_size=128256),
}


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=sorted(MODELS), required=True)
    ap.add_argument("--precision", choices=["bf16", "bf16-mixed"], required=True)
    ap.add_argument("--micro-batch", type=int, required=True)
    ap.add_argument("--context", type=int, required=True)
    ap.add_argument("--checkpointing", choices=["none", "full"], required=True)
    ap.add_argument("--sdpa", choices=["cudnn", "flash"], required=True)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--dry-run", action="store_true")
    args = ap.parse_args(argv)
    if args.steps <= args.warmup:
        ap.error("--steps must exceed --warmup: the timed steps are the ones after it")
    return args


def llama_config(args):
    fields = dict(MODELS[args.model])
    fields.update(max_position_embeddings=max(args.context, 4096), rms_norm_eps=1e-5, tie_word_embeddings=False,
                  attn_implementation="sdpa", use_cache=False)
    return fields


def run(args):
    import torch  # imported here so --dry-run needs no torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from transformers import LlamaConfig, LlamaForCausalLM

    backend = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION}[args.sdpa]
    torch.manual_seed(0)
    device = torch.device("cuda")
    pure = args.precision == "bf16"
    # Built on the device in its storage dtype: a 7B model in fp32 on the host would take minutes.
    torch.set_default_dtype(torch.bfloat16 if pure else torch.float32)
    with device:
        model = LlamaForCausalLM(LlamaConfig(**llama_config(args)))
    torch.set_default_dtype(torch.float32)
    if args.checkpointing == "full":
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5, fused=True)
    tokens = torch.randint(0, model.config.vocab_size, (args.micro_batch, args.context), device=device)
    torch.cuda.reset_peak_memory_stats()
    times = []
    for step in range(args.steps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        with sdpa_kernel(backend), torch.autocast("cuda", dtype=torch.bfloat16, enabled=not pure):
            loss = model(input_ids=tokens, labels=tokens).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        end.record()
        torch.cuda.synchronize()
        if step >= args.warmup:
            times.append(start.elapsed_time(end))
    free, total = torch.cuda.mem_get_info()
    step_ms = statistics.median(times)
    return {
        "tokens_per_s": args.micro_batch * args.context / (step_ms / 1e3),
        "step_ms": step_ms,
        "max_memory_allocated": torch.cuda.max_memory_allocated(),
        "max_memory_reserved": torch.cuda.max_memory_reserved(),
        "device_used": total - free,
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name(),
    }


def main(argv):
    args = parse_args(argv)
    if args.dry_run:
        print(json.dumps({"dry_run": True, "config": llama_config(args), "precision": args.precision,
                          "micro_batch": args.micro_batch, "checkpointing": args.checkpointing, "sdpa": args.sdpa,
                          "steps": args.steps, "warmup": args.warmup}))
        return 0
    print(json.dumps(run(args)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
