// Self-test cases that train: three optimizer steps of the tiny Llama on
// synthetic tokens, per optimizer and precision, through the real trainer
// on each backend; the per-step losses are the compared output. They join
// kernels/selftest's op cases (which cannot see the trainer) in `tune selftest`.
#pragma once

#include <vector>

#include "kernels/selftest/selftest.h"

namespace tune::harness {

std::vector<kernels::selftest::Case> training_cases();

}  // namespace tune::harness
