// `--framework F` on `tune estimate` and `tune best`: the stack the answer is for,
// named as a profile (estimate/frameworks) or as an export target whose stack it is
// (accelerate-fsdp1 is accelerate-fsdp's).
#pragma once

#include <string>
#include <vector>

#include "estimate/frameworks/framework_profile.h"

namespace tune::cli {

// The names the flag takes: every profile's, then the export targets that name a profile's stack.
std::vector<std::string> framework_flag_choices();

// The profile a name the flag took stands for; "" (the flag not given) is our engine, `tune`.
FrameworkProfile framework_flag_profile(const std::string& name);

}  // namespace tune::cli
