// Times the collectives ZeRO uses on a communicator (MPI on the CPU, NCCL on
// GPUs), for the time model's probed bus bandwidth (estimate/probed_rates.h).
// Every rank of the job calls it with the same plan; all of them take the
// same decisions (rank 0's clock decides when a probe has run long enough).
#pragma once

#include <functional>
#include <vector>

#include "estimate/probed_rates.h"
#include "kernels/backend.h"
#include "train/comm/comm.h"

namespace tune::train {

struct CollectiveTiming {
    CollectiveRate rate;  // bus_bytes_per_s filled in
    double seconds = 0;   // the probe's whole run, untimed call included
};

// Each planned (op, bytes, dtype) at comm's world size, called as the trainer
// calls it: one untimed call, then doubling batches of calls until a batch
// takes min_seconds (rank 0's clock, before_each_call included). Buffers come from `backend` (device
// memory on a GPU); bytes are rounded up to a whole number of the dtype's
// elements per rank. With `before_each_call` (cmd_probe_collectives: a GEMM,
// probe/probe_timing.h gemm_primer) each rank runs it untimed before every
// call, as a step computes before each collective: the call then starts on a
// core that just computed, on data out of its caches, when both ranks are
// done, not in lockstep.
std::vector<CollectiveTiming> time_collectives(Comm& comm, kernels::Backend& backend,
                                               const std::vector<CollectiveRate>& plan, double min_seconds,
                                               const std::function<void()>& before_each_call = {});

}  // namespace tune::train
