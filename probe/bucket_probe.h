// The gradient bucket probe (estimate/probed_rates.h BucketRate): a ZeRO-2/3
// bucket's memory work around its reduce-scatter, as train/trainer.cpp
// BucketSink does it: the rank's slice added into its gradient shard (a step's
// first is copied, a little less work; the bucket is not zeroed ahead,
// train/grad_targets.h). The reduce-scatter itself is the collective probes'.
#pragma once

#include "estimate/probed_rates.h"
#include "kernels/backend.h"
#include "probe/probe_timing.h"

namespace tune::probe {

// Seconds per bucket (the rate's `seconds`); `spent`: the probe's whole run.
double probe_bucket(kernels::Backend& backend, const BucketRate& rate, const ProbeSettings& s, double* spent);

}  // namespace tune::probe
