// Self-test cases that train: three optimizer steps of the tiny Llama on
// synthetic tokens, per optimizer and precision, through the real trainer
// on each backend; the per-step losses are the compared output. They join
// kernels/selftest's op cases (which cannot see the trainer) in `tune selftest`.
//
// zero_stages_against_cpu is `tune selftest --gpus N`'s comparison: every
// ZeRO stage trained for two steps across the ranks of a communicator
// against one CPU process holding the whole global batch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/selftest/selftest.h"
#include "train/comm/comm.h"

namespace tune::train {

std::vector<kernels::selftest::Case> training_cases();

// One ZeRO stage across ranks against the CPU reference.
struct ZeroStageResult {
    std::uint32_t stage = 0;
    int ranks = 1;
    double param_diff = 0;  // max |ranks - cpu| over every real parameter element after the steps
    double loss_diff = 0;   // max over steps |loss averaged over ranks - cpu loss|
    double moved = 0;       // max |cpu after - cpu before|: how far the steps moved the weights
    double param_tolerance = 0;
    double loss_tolerance = 0;
    bool pass = false;
    std::string error;  // the reference could not run (rank 0's own failure)
};

struct ZeroSelftestOptions {
    std::uint64_t seed = 1234;
    std::uint32_t steps = 2;
    std::uint32_t context = 64;
};

// Every rank of `comm` calls it with its own backend: for stages 0-3 it
// trains the tiny model (fp32, adamw, micro-batch 1 per rank) for
// options.steps steps, then rank 0 compares the weights (collective
// download) and the losses averaged over ranks with a single-process CPU
// Trainer (SingleRankComm, micro-batch = world size) it runs itself.
// Rank 0 gets one filled result per stage; the other ranks get the stages
// with only `stage` and `ranks` set. A failure on the ranks' backend or comm
// is thrown (the other ranks may then be waiting in a collective).
std::vector<ZeroStageResult> zero_stages_against_cpu(kernels::Backend& backend, Comm& comm,
                                                     const ZeroSelftestOptions& options = {});

}  // namespace tune::train
