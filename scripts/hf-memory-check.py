#!/usr/bin/env python3
"""tune's hf-trainer profile against Hugging Face Trainer's measured memory and speed, on a GPU.

Usage: hf-memory-check.py --tune BIN [--model llama3.2-1b] [--out FILE.md] [--budget-s 420] [--dry-run]

For each of six configurations (precision, checkpointing, micro-batch, context, LoRA):
  1. `tune estimate --framework hf-trainer --json` predicts the allocated, reserved and device
     memory views and tokens/s for the model on this card's preset;
  2. the TrainingArguments tune emits for those settings (`tune export --emit hf-trainer` of the
     matching trial of a small CPU sweep of the tiny model: the settings do not depend on the model);
  3. a child process builds LlamaForCausalLM of the model's shape from a LlamaConfig with random
     weights (PEFT's LoraConfig from the export's notes for LoRA), trains 4 steps with
     transformers.Trainer and those arguments, and reads torch.cuda.max_memory_allocated(),
     max_memory_reserved(), the device's used bytes, and the median step time after the first.
It prints one row per configuration with the errors and appends the table to --out (default:
the day's results file, scripts/gpu-results.sh). A configuration past the budget is recorded as skipped. --dry-run prints
the estimates and the plan, and needs no torch.
"""
import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

# precision, checkpointing, micro-batch, context, method
CONFIGS = [
    ("bf16-mixed", "none", 1, 1024, "full"),
    ("bf16-mixed", "full", 4, 2048, "full"),
    ("bf16", "none", 2, 1024, "full"),
    ("fp32", "full", 1, 1024, "full"),
    ("bf16-mixed", "none", 2, 2048, "lora"),
    ("bf16", "full", 4, 2048, "lora"),
]

SWEEP = """name = "hf-memory-check"
[model]
preset = "tiny"
[hardware]
device = "cpu"
gpus = 1
[space]
optimizer = ["adamw"]
precision = ["bf16-mixed", "bf16", "fp32"]
checkpointing = ["none", "full"]
micro_batch = [1, 2, 4]
method = ["full", "lora"]
context = [32]
[trial]
steps = 2
warmup = 1
[output]
database = "hf.db"
report = "hf.html"
"""


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def estimate(tune, model, device, config):
    precision, ckpt, mb, ctx, method = config
    cmd = [tune, "estimate", "--model", model, "--device", device, "--optimizer", "adamw", "--precision", precision,
           "--checkpointing", ckpt, "--micro-batch", str(mb), "--context", str(ctx), "--method", method,
           "--framework", "hf-trainer", "--json"]
    out = run(cmd)
    if out.returncode not in (0, 1):  # 1: does not fit, still an estimate
        raise SystemExit(f"hf-memory-check: {' '.join(cmd)} failed: {out.stderr}")
    j = json.loads(out.stdout)
    return {"allocated": j["memory"]["views"]["allocated"], "reserved": j["memory"]["views"]["reserved"],
            "device": j["memory"]["views"]["device"], "tokens_per_s": j["time"]["tokens_per_s"]}


def emitted_settings(tune, work):
    """(precision, checkpointing, micro-batch, method) -> (TrainingArguments JSON, notes) from a tiny CPU sweep."""
    with open(os.path.join(work, "hf.toml"), "w") as f:
        f.write(SWEEP)
    swept = run([tune, "sweep", os.path.join(work, "hf.toml")], cwd=work)
    if swept.returncode != 0:
        raise SystemExit(f"hf-memory-check: the tiny CPU sweep failed: {swept.stderr[-400:]}")
    db = os.path.join(work, "hf.db")
    trials = json.loads(run([tune, "export", "--db", db, "--format", "json"]).stdout)["trials"]
    out = {}
    for t in trials:
        c = t["config"]
        key = (c["precision"], c["checkpointing"], c["micro_batch"], c.get("method", "full"))
        emit = run([tune, "export", "--db", db, "--trial", str(t["id"]), "--emit", "hf-trainer"])
        if emit.returncode == 0:
            out[key] = (emit.stdout, emit.stderr)
    return out


def child(spec):
    """Trains 4 steps in this process and prints the measured peaks and speed as JSON."""
    import re
    import torch
    import transformers

    args = json.loads(spec["arguments"])
    args.update(output_dir=spec["work"], report_to=[], save_strategy="no", max_steps=4, logging_steps=1)
    training = transformers.TrainingArguments(**args)
    shape = json.loads(spec["shape"])
    config = transformers.LlamaConfig(vocab_size=shape["vocab"], hidden_size=shape["hidden"],
                                      intermediate_size=shape["ffn"], num_hidden_layers=shape["layers"],
                                      num_attention_heads=shape["heads"], num_key_value_heads=shape["kv_heads"],
                                      max_position_embeddings=max(shape["max_context"], spec["context"]),
                                      tie_word_embeddings=shape.get("tied_embeddings", False),
                                      attn_implementation="sdpa")
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config)
    if spec["precision"] == "bf16":
        model = model.to(torch.bfloat16)  # the export's notes: load the model in bfloat16
    found = re.search(r"peft\.LoraConfig\((.*?)\)\)", spec["notes"])
    if spec["method"] == "lora" and found:
        import peft
        model = peft.get_peft_model(model, eval(f"peft.LoraConfig({found.group(1)})", {"peft": peft}))
    steps = 4 * training.gradient_accumulation_steps * training.per_device_train_batch_size
    ids = torch.randint(0, config.vocab_size, (steps, spec["context"]))
    data = [{"input_ids": row, "labels": row} for row in ids]
    marks = []

    class Timer(transformers.TrainerCallback):
        def on_step_begin(self, *a, **k):
            torch.cuda.synchronize()
            marks.append(time.perf_counter())

        def on_step_end(self, *a, **k):
            torch.cuda.synchronize()
            marks.append(time.perf_counter())

    torch.cuda.reset_peak_memory_stats()
    transformers.Trainer(model=model, args=training, train_dataset=data, callbacks=[Timer()]).train()
    free, total = torch.cuda.mem_get_info()
    step_s = statistics.median(marks[i + 1] - marks[i] for i in range(2, len(marks) - 1, 2))
    tokens = training.per_device_train_batch_size * training.gradient_accumulation_steps * spec["context"]
    print(json.dumps({"allocated": torch.cuda.max_memory_allocated(), "reserved": torch.cuda.max_memory_reserved(),
                      "device": total - free, "tokens_per_s": tokens / step_s, "card": torch.cuda.get_device_name(),
                      "torch": torch.__version__, "transformers": transformers.__version__}))


def error(got, want):
    return f"{100 * (want - got) / got:+.1f}%" if got else "-"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tune", required=True)
    ap.add_argument("--model", default="llama3.2-1b")
    ap.add_argument("--device", default="auto", help="tune's preset for the card (auto: h200 or h100-80gb by name)")
    ap.add_argument("--out", help="the Markdown file to append to (default: scripts/gpu-results.sh's)")
    ap.add_argument("--budget-s", type=float, default=420)
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(json.loads(args.child))
        return 0
    deadline = time.time() + args.budget_s
    if args.device == "auto":
        try:
            name = run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"]).stdout
        except OSError:
            name = ""
        args.device = "h200" if "H200" in name else "h100-80gb"
    shape = run([args.tune, "estimate", "--model", args.model, "--json"]).stdout
    shape = json.dumps(json.loads(shape)["config"]["model"])
    predicted = [estimate(args.tune, args.model, args.device, c) for c in CONFIGS]
    if args.dry_run:
        for c, p in zip(CONFIGS, predicted):
            print(json.dumps({"config": c, "predicted": p}))
        return 0
    rows, card = [], "no run"
    with tempfile.TemporaryDirectory() as work:
        settings = emitted_settings(args.tune, work)
        for c, p in zip(CONFIGS, predicted):
            precision, ckpt, mb, ctx, method = c
            label = f"{precision} {ckpt} mb{mb} ctx{ctx} {method}"
            if time.time() + 90 > deadline:
                rows.append(f"| {label} | skipped (budget) | | | |")
                continue
            arguments, notes = settings.get((precision, ckpt, mb, method), (None, ""))
            if arguments is None:
                rows.append(f"| {label} | no hf-trainer export for these settings | | | |")
                continue
            spec = dict(arguments=arguments, notes=notes, shape=shape, context=ctx, precision=precision,
                        method=method, work=work)
            out = run([sys.executable, __file__, "--tune", args.tune, "--child", json.dumps(spec)],
                      timeout=max(30, deadline - time.time()))
            if out.returncode != 0:
                rows.append(f"| {label} | failed: {out.stderr.strip().splitlines()[-1][:160]} | | | |")
                continue
            m = json.loads(out.stdout.strip().splitlines()[-1])
            gib = lambda b: f"{b / 2**30:.2f}"
            rows.append(f"| {label} | {gib(m['allocated'])} / {gib(m['reserved'])} / {gib(m['device'])} | "
                        f"{gib(p['allocated'])} / {gib(p['reserved'])} / {gib(p['device'])} | "
                        f"{error(m['allocated'], p['allocated'])} / {error(m['reserved'], p['reserved'])} / "
                        f"{error(m['device'], p['device'])} | {m['tokens_per_s']:.0f} vs {p['tokens_per_s']:.0f} "
                        f"({error(m['tokens_per_s'], p['tokens_per_s'])}) |")
            print(rows[-1], flush=True)
            card = f"{m['card']}, torch {m['torch']}, transformers {m['transformers']}"
    if not args.out:
        args.out = run([os.path.join(os.path.dirname(os.path.abspath(__file__)), "gpu-results.sh")]).stdout.strip()
    with open(args.out, "a") as f:
        f.write(f"\n## hf-trainer memory check, {datetime.date.today()}, {card}\n\n"
                f"`scripts/hf-memory-check.py --model {args.model} --device {args.device}`: measured "
                "max_memory_allocated / max_memory_reserved / device used (GiB) beside "
                "`tune estimate --framework hf-trainer`, and tokens/s.\n\n"
                "| configuration | measured | tune | error | tokens/s measured vs tune |\n|---|---|---|---|---|\n")
        f.write("\n".join(rows) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
