#!/usr/bin/python3
"""Times one fp32 training step (forward, backward, grad-norm clip, AdamW) of
a Llama in plain PyTorch, the model of make_torch_fixtures.py at the given
dimensions. Prints the mean step time in ms after warmup on the last line.
Used by scripts/bench_vs_torch.sh."""
import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_torch_fixtures import loss_of, make_params  # noqa: E402
import make_torch_fixtures as fx  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vocab", type=int, required=True)
    ap.add_argument("--hidden", type=int, required=True)
    ap.add_argument("--layers", type=int, required=True)
    ap.add_argument("--heads", type=int, required=True)
    ap.add_argument("--kv-heads", type=int, required=True)
    ap.add_argument("--ffn", type=int, required=True)
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--context", type=int, required=True)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    c = dict(vocab_size=a.vocab, hidden_size=a.hidden, intermediate_size=a.ffn, num_hidden_layers=a.layers,
             num_attention_heads=a.heads, num_key_value_heads=a.kv_heads, rms_norm_eps=1e-5, rope_theta=10000.0)
    fx.BATCH, fx.SEQ = a.batch, a.context
    gen = torch.Generator().manual_seed(0)
    params = make_params(c, gen)
    opt = torch.optim.AdamW(list(params.values()), lr=1e-4, weight_decay=0.0)
    times = []
    for step in range(a.steps):
        window = torch.randint(0, a.vocab, (a.batch * a.context + 1,), generator=gen)
        start = time.perf_counter()
        opt.zero_grad()
        loss, _ = loss_of(params, window, c)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(params.values()), 1.0)
        opt.step()
        times.append((time.perf_counter() - start) * 1e3)
        print(f"torch step {step + 1}/{a.steps} | loss {loss.item():.4f} | {times[-1]:.1f} ms", file=sys.stderr)
    timed = times[a.warmup:]
    print(f"{sum(timed) / len(timed):.3f}")


if __name__ == "__main__":
    main()
