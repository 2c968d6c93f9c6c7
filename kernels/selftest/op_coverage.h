// Which ops of the interface a list of self-test cases checks. The ops are
// kernels/backend.h's kBackendOps, so a new op without a case shows here
// (and fails tests/test_selftest.cpp) with no list to keep by hand.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "kernels/selftest/selftest.h"

namespace tune::kernels::selftest {

// The Backend ops no case checks, in kBackendOps' order.
std::vector<std::string_view> uncovered_ops(const std::vector<Case>& cases);

// The names cases claim to check that are not Backend ops (a misspelt or
// renamed op), each once.
std::vector<std::string> unknown_ops(const std::vector<Case>& cases);

}  // namespace tune::kernels::selftest
