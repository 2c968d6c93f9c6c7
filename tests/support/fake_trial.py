#!/usr/bin/env python3
"""A stand-in for `tune trial` in the sweep driver's tests: answers like the
real trial (one JSON TrialResult as the last stdout line) with memory and
throughput that are simple functions of the configuration, and misbehaves on
request so the driver's isolation can be tested without training anything.

FAKE_TRIAL_FAULT_<optimizer>=crash|hang|nan|oom|silent|oom-lost makes every
trial of that optimizer abort, sleep forever, report a NaN loss, report an
OOM, exit without a result, or exit 3 with only the OOM on stderr (a rank
that aborted its job before its result line got through).
FAKE_TRIAL_SLEEP=seconds slows every trial down.
FAKE_TRIAL_FILL=path writes to that file until its disk is full, then answers.
FAKE_TRIAL_LOG=path appends one JSON line per trial: its start and end time, CPU
affinity, CUDA_VISIBLE_DEVICES and OMP_PLACES (where the driver placed it).
"""
import json
import os
import signal
import sys
import time

args = sys.argv[1:]
config = json.loads(args[args.index("--config") + 1])
fault = os.environ.get("FAKE_TRIAL_FAULT_" + config["optimizer"], "")
began = time.time()
time.sleep(float(os.environ.get("FAKE_TRIAL_SLEEP", "0")))
if os.environ.get("FAKE_TRIAL_LOG"):
    placed = {"start": began, "end": time.time(), "cpus": sorted(os.sched_getaffinity(0)),
              "gpus": os.environ.get("CUDA_VISIBLE_DEVICES"), "places": os.environ.get("OMP_PLACES")}
    with open(os.environ["FAKE_TRIAL_LOG"], "a") as log:
        log.write(json.dumps(placed) + "\n")
print("fake trial starting", file=sys.stderr)
if os.environ.get("FAKE_TRIAL_FILL"):
    try:
        with open(os.environ["FAKE_TRIAL_FILL"], "ab", buffering=0) as filler:
            while True:
                filler.write(bytes(4096))
    except OSError:
        pass

if fault == "crash":
    os.kill(os.getpid(), signal.SIGABRT)
if fault == "hang":
    time.sleep(3600)
if fault == "silent":
    sys.exit(7)
if fault == "oom-lost":
    print("trial oom: rank 1 of 2: out of memory: requested 4096 bytes with 10 bytes live", file=sys.stderr)
    sys.exit(3)

state = {"adamw": 8, "lion": 4, "adam8bit": 2, "adafactor": 1, "lomo": 0}[config["optimizer"]]
tokens = config["micro_batch"] * config["context"]
peak = 1_000_000 * (4 + state) // (1 + config["zero_stage"]) + 2_000 * tokens
tokens_per_s = 1e9 / (peak + 50_000 * config["zero_stage"])
result = {
    "status": "ok",
    "config": config,
    "memory": {"params": peak // 2, "activations": peak - peak // 2, "peak": peak, "peak_phase": "layer-backward"},
    "step_ms": [10.0] * config["steps"],
    "losses": [5.5 - 0.1 * i for i in range(config["steps"])],
    "tokens_per_s": tokens_per_s,
    "mfu": 0.1,
}
if fault == "nan":
    result = {"status": "failed", "reason": "the loss became NaN at step 1", "config": config}
if fault == "oom":
    result = {"status": "oom", "reason": "out of memory", "config": config, "oom_requested": 123, "oom_live": 456}
print(json.dumps(result))
sys.exit({"oom": 3, "nan": 5}.get(fault, 0))
