#!/usr/bin/python3
"""Write tests/fixtures/adafactor.txt: parameters of a 4x6 matrix and a
5-vector through 4 Adafactor steps with the transformers defaults.

The step below mirrors transformers.optimization.Adafactor.step (lr=None,
eps=(1e-30, 1e-3), clip_threshold=1.0, decay_rate=-0.8, beta1=None,
weight_decay=0.0, scale_parameter=True, relative_step=True,
warmup_init=False) in float32 torch; transformers itself is not needed.
Each line: a name, a count, then float32 values printed with 9 digits.

Usage: /usr/bin/python3 scripts/gen_adafactor_fixture.py [OUT]
"""
import math
import sys

import torch

EPS = (1e-30, 1e-3)
CLIP_THRESHOLD = 1.0
DECAY_RATE = -0.8


def rms(tensor):
    return tensor.norm(2) / (tensor.numel() ** 0.5)


def get_lr(step, param_rms):
    rel_step_sz = min(1e-2, 1.0 / math.sqrt(step))
    param_scale = max(EPS[1], param_rms)
    return param_scale * rel_step_sz


def approx_sq_grad(row, col):
    r_factor = (row / row.mean(dim=-1, keepdim=True)).rsqrt_().unsqueeze(-1)
    c_factor = col.unsqueeze(-2).rsqrt()
    return torch.mul(r_factor, c_factor)


def adafactor_step(p, grad, state):
    factored = grad.dim() >= 2
    if not state:
        state["step"] = 0
        if factored:
            state["row"] = torch.zeros(grad.shape[:-1])
            state["col"] = torch.zeros(grad.shape[:-2] + grad.shape[-1:])
        else:
            state["v"] = torch.zeros_like(grad)
    state["step"] += 1
    param_rms = rms(p)
    lr = get_lr(state["step"], param_rms)
    beta2t = 1.0 - math.pow(state["step"], DECAY_RATE)
    update = grad**2 + EPS[0]
    if factored:
        state["row"].mul_(beta2t).add_(update.mean(dim=-1), alpha=(1.0 - beta2t))
        state["col"].mul_(beta2t).add_(update.mean(dim=-2), alpha=(1.0 - beta2t))
        update = approx_sq_grad(state["row"], state["col"])
        update.mul_(grad)
    else:
        state["v"].mul_(beta2t).add_(update, alpha=(1.0 - beta2t))
        update = state["v"].rsqrt().mul_(grad)
    update.div_((rms(update) / CLIP_THRESHOLD).clamp_(min=1.0))
    update.mul_(lr)
    p.add_(-update)


def line(name, tensor):
    values = tensor.flatten().tolist()
    return "%s %d %s\n" % (name, len(values), " ".join("%.9g" % v for v in values))


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/adafactor.txt"
    torch.manual_seed(0)
    with open(out, "w") as f:
        f.write("# transformers Adafactor defaults, 4 steps; scripts/gen_adafactor_fixture.py, torch %s\n"
                % torch.__version__)
        for name, shape in (("matrix", (4, 6)), ("vector", (5,))):
            p = torch.randn(shape) * 0.5
            # Growing gradient scale, so the second-moment statistics lag and the clip acts.
            grads = [torch.randn(shape) * (0.1 + step) for step in range(4)]
            f.write(line(name + ".p0", p))
            state = {}
            for step, g in enumerate(grads, start=1):
                f.write(line("%s.g%d" % (name, step), g))
                adafactor_step(p, g, state)
                f.write(line("%s.p%d" % (name, step), p))


if __name__ == "__main__":
    main()
