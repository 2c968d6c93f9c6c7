// How a sweep's configurations were whittled down: enumerated, then invalid
// and pruned ones set aside, then run, then what running them gave.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "store/records.h"

namespace tune {

struct FunnelStage {
    std::string name;  // "enumerated", "invalid", ...
    std::uint64_t count = 0;
    int depth = 0;        // 0 for the whole, 1 for a part of the stage above it
    std::string meaning;  // one line for readers who do not know the word
};

// enumerated, invalid, pruned, run, ok, oom, failed, timeout; then "not run
// yet" (pending + running) only when a sweep is unfinished.
std::vector<FunnelStage> funnel(const SweepSummary& sweep);

}  // namespace tune
