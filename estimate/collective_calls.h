// The collectives one optimizer step calls, per rank: which, how large and how
// many times, following the trainer's schedule (train/trainer.cpp, as
// core/zero_plan names it). The time model prices each call at the probed
// time of its op at its size (latency plus bytes over bandwidth), so a step
// of many small calls (LOMO's per-tensor all-reduces, stage 3's gathers per
// micro-batch, the scalar norm) costs what the calls do, not only its bytes.
#pragma once

#include <cstdint>
#include <vector>

#include "core/config.h"
#include "estimate/probed_rates.h"

namespace tune {

struct CollectiveCall {
    Collective op = Collective::all_reduce;
    double bytes = 0;  // the buffer, as nccl-tests sizes it (see bus_bandwidth); an average over `count` calls
    double count = 0;  // calls per optimizer step
    // Stages 2-3: the buffer is a gradient bucket (train/trainer.cpp BucketSink),
    // whose slice is added into the rank's gradient shard after the call: memory
    // work beside the call's own (ProbedRates::buckets).
    bool bucket = false;
};

// LOMO's backward passes per step: a first one for the global norm when it
// clips or fp16 may overflow, then the applying one.
double lomo_backward_passes(const TrialConfig& c);

// The data-parallel group's calls: ZeRO's over the dp replicas, of one
// tensor-parallel rank's shard (`m` is the whole model). Empty with one
// replica. Sum of count * bytes * bus_factor(op, dp) over the calls is the
// bytes each rank sends to its replicas per step.
std::vector<CollectiveCall> collective_calls(const ModelSpec& m, const TrialConfig& c);

}  // namespace tune
