#!/usr/bin/env python3
"""Loads tune's exports with the frameworks' own code, and trains two steps with them.

Usage: framework-check.py --tune BIN [--out FILE.md] [--runs N] [--work DIR]

Runs on a machine with torch, transformers, peft and accelerate (a lent GPU
machine; deepspeed and bitsandbytes where installed). It
  1. runs a CPU sweep of the `tiny-variants` model (biases, q/k norms, tied
     embeddings, head_dim, llama3 RoPE) over every optimizer, precision,
     ZeRO stage 0 and 3, checkpointing and method, so the database holds one
     measured trial of each;
  2. emits every trial for every target (`tune export --emit`);
  3. loads each file with the framework's classes: TrainingArguments for
     hf-trainer, HfArgumentParser for the torchrun line, accelerate's
     ClusterConfig.from_yaml_file, DeepSpeed's DeepSpeedConfig, and the
     peft.LoraConfig the export tells the script to build;
  4. trains two HF Trainer steps of a random model of the trial's shape (the
     transformers class the exporter names) with up to N of the hf-trainer
     files that need no DeepSpeed, on the GPU when there is one.
It prints one line per file and writes a Markdown table to --out. A missing
package is "missing", not a failure. Exit 1 when any export failed to load or
train, 0 otherwise.
"""
import argparse
import concurrent.futures
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import traceback

TARGETS = ["hf-trainer", "torchrun", "accelerate-fsdp", "accelerate-fsdp1", "deepspeed"]

SWEEP = """name = "framework-check"
[model]
preset = "tiny-variants"
[hardware]
device = "cpu"
gpus = 1
memory_limit = "4GiB"
[space]
optimizer = ["adamw", "lion", "adam8bit", "adafactor", "lomo"]
precision = ["fp32", "bf16-mixed", "fp16-mixed", "bf16"]
zero_stage = [0, 3]
checkpointing = ["none", "full"]
method = ["full", "lora", "qlora"]
context = [32]
micro_batch = [2]
[trial]
steps = 2
warmup = 1
[output]
database = "check.db"
report = "check.html"
"""


class Missing(Exception):
    """A package the check needs is not installed here."""


def need(module):
    try:
        return __import__(module, fromlist=["_"])
    except ImportError as e:
        raise Missing(f"{module} is not installed ({e})")


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True)


def trials(tune, db):
    out = run([tune, "export", "--db", db, "--format", "json"])
    if out.returncode != 0:
        sys.exit(f"framework-check: tune export failed: {out.stderr}")
    return [t for t in json.loads(out.stdout)["trials"] if t["status"] == "ok"]


def emit(tune, db, trial, target):
    out = run([tune, "export", "--db", db, "--trial", str(trial), "--emit", target])
    return out.returncode, out.stdout, out.stderr


def training_arguments(args_dict, work):
    transformers = need("transformers")
    args = dict(args_dict, output_dir=os.path.join(work, "out"), report_to=[], save_strategy="no")
    return transformers.TrainingArguments(**args)


def load_hf_trainer(body, notes, work):
    args = json.loads(body)
    if "deepspeed" in args:
        need("deepspeed")
    return training_arguments(args, work)


def load_torchrun(body, notes, work):
    transformers = need("transformers")
    words = shlex.split([l for l in body.splitlines() if l.startswith("torchrun")][0])
    flags = words[words.index("train.py") + 1:]
    flags += ["--output_dir", os.path.join(work, "out"), "--report_to", "none"]
    parser = transformers.HfArgumentParser(transformers.TrainingArguments)
    return parser.parse_args_into_dataclasses(args=flags)[0]


def load_accelerate(body, notes, work):
    need("accelerate")
    from accelerate.commands.config.config_args import ClusterConfig
    path = os.path.join(work, "accelerate.yaml")
    with open(path, "w") as f:
        f.write(body)
    return ClusterConfig.from_yaml_file(path)


def load_deepspeed(body, notes, work):
    need("deepspeed")
    from deepspeed.runtime.config import DeepSpeedConfig
    return DeepSpeedConfig(json.loads(body))


LOADERS = {"hf-trainer": load_hf_trainer, "torchrun": load_torchrun, "accelerate-fsdp": load_accelerate,
           "accelerate-fsdp1": load_accelerate, "deepspeed": load_deepspeed}


def lora_config(notes):
    """The peft.LoraConfig(...) the export's notes tell the script to build, built by peft."""
    found = re.search(r"peft\.LoraConfig\((.*?)\)\)", notes)
    if not found:
        return None
    peft = need("peft")
    return eval(f"peft.LoraConfig({found.group(1)})", {"peft": peft})


def model_of(config):
    """A random transformers model of the trial's shape, the class the exporter names."""
    transformers = need("transformers")
    m = config["model"]
    common = dict(vocab_size=m["vocab"], hidden_size=m["hidden"], intermediate_size=m["ffn"],
                  num_hidden_layers=m["layers"], num_attention_heads=m["heads"],
                  num_key_value_heads=m["kv_heads"], rms_norm_eps=m["rms_norm_eps"], rope_theta=m["rope_theta"],
                  max_position_embeddings=m["max_context"], tie_word_embeddings=m.get("tied_embeddings", False),
                  head_dim=m.get("head_dim", m["hidden"] // m["heads"]))
    rs = m.get("rope_scaling")
    if isinstance(rs, dict):
        common["rope_scaling"] = {"rope_type": rs["type"], "factor": rs["factor"],
                                  "low_freq_factor": rs["low_freq_factor"],
                                  "high_freq_factor": rs["high_freq_factor"],
                                  "original_max_position_embeddings": rs["original_context"]}
    if m.get("qk_norm"):
        cfg = transformers.Qwen3Config(attention_bias=m.get("qkv_bias", False), **common)
        return transformers.Qwen3ForCausalLM(cfg)
    cfg = transformers.LlamaConfig(attention_bias=m.get("qkv_bias", False), mlp_bias=m.get("mlp_bias", False),
                                   **common)
    return transformers.LlamaForCausalLM(cfg)


def train_two_steps(config, args, notes):
    torch = need("torch")
    transformers = need("transformers")
    model = model_of(config)
    lora = lora_config(notes)
    if config.get("method") == "qlora":
        need("bitsandbytes")
    if lora is not None:
        model = need("peft").get_peft_model(model, lora)
    tokens = config["micro_batch"] * 4 * config["context"]
    ids = torch.randint(0, config["model"]["vocab"], (tokens // config["context"], config["context"]))
    data = [{"input_ids": row, "labels": row} for row in ids]
    args.max_steps = 2
    args.logging_steps = 1
    trainer = transformers.Trainer(model=model, args=args, train_dataset=data)
    out = trainer.train()
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    if not losses or any(l != l for l in losses):
        raise RuntimeError(f"losses {losses}")
    return f"2 steps, loss {losses[-1]:.3f} ({out.metrics.get('train_runtime', 0):.1f} s)"


def check(emitted, trial, target, work, runs_left):
    code, body, notes = emitted
    if code == 2:
        return "refused", notes.strip().splitlines()[-1][:160]
    if code != 0:
        return "FAIL", f"tune export exit {code}: {notes.strip()[:160]}"
    try:
        loaded = LOADERS[target](body, notes, work)
        if target == "hf-trainer" and "deepspeed" not in json.loads(body) and runs_left[0] > 0:
            runs_left[0] -= 1
            return "trained", train_two_steps(trial["config"], loaded, notes)
        if target in ("hf-trainer", "torchrun"):
            lora_config(notes)
        return "loaded", type(loaded).__name__
    except Missing as e:
        return "missing", str(e)
    except Exception as e:  # the framework refused the file: the fault this check exists to find
        return "FAIL", f"{type(e).__name__}: {e}"[:300] + "\n" + traceback.format_exc(limit=3)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tune", required=True)
    p.add_argument("--out", default=None)
    p.add_argument("--runs", type=int, default=12, help="HF Trainer runs of two steps (default 12)")
    p.add_argument("--work", default=None)
    a = p.parse_args()
    work = a.work or tempfile.mkdtemp(prefix="framework-check-")
    os.makedirs(work, exist_ok=True)
    with open(os.path.join(work, "check.toml"), "w") as f:
        f.write(SWEEP)
    sweep = run([a.tune, "sweep", os.path.join(work, "check.toml"), "--no-probe"])
    if sweep.returncode not in (0, 1):
        sys.exit(f"framework-check: the sweep failed (exit {sweep.returncode}): {sweep.stderr[-2000:]}")
    db = os.path.join(work, "check.db")
    rows, failed, runs_left = [], 0, [a.runs]
    # Every export first, in parallel (each is a process of tune), then the loads in this process.
    jobs = [(t, target) for t in trials(a.tune, db) for target in TARGETS]
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        emitted = list(pool.map(lambda job: emit(a.tune, db, job[0]["id"], job[1]), jobs))
    for (t, target), out in zip(jobs, emitted):
        c = t["config"]
        label = (f"{c['optimizer']} {c['precision']} z{c['zero_stage']} {c['checkpointing']} {c.get('method', 'full')}")
        status, detail = check(out, t, target, work, runs_left)
        failed += status == "FAIL"
        print(f"{status:8} {target:17} {label}: {detail.splitlines()[0] if detail else ''}", flush=True)
        rows.append((label, target, status, detail.splitlines()[0] if detail else ""))
    counts = {s: sum(r[2] == s for r in rows) for s in ("trained", "loaded", "refused", "missing", "FAIL")}
    summary = ", ".join(f"{n} {s}" for s, n in counts.items())
    print(f"{len(rows)} files: {summary}")
    if a.out:
        with open(a.out, "w") as f:
            f.write(f"{len(rows)} emitted files: {summary}.\n\n| configuration | target | outcome | detail |\n"
                    "|---|---|---|---|\n")
            for r in rows:
                f.write("| " + " | ".join(x.replace("|", "/") for x in r) + " |\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
