// The collective bus-bandwidth probes need ranks: like a multi-rank trial,
// `tune probe-collectives` is started under the sweep's launcher (mpirun or
// srun) at each world size of the plan; rank 0 prints the measured rates.
#pragma once

#include <string>
#include <vector>

#include "probe/probes.h"
#include "sweep/spec.h"

namespace tune {

// `program`: the command that runs the probing ranks, e.g. {<tune>, "probe-collectives"}.
// A world size whose ranks fail to start or report is left out (stderr says why):
// the time model then prices its collectives at the device's nominal link rate.
probe::CollectiveProber collective_prober(const SweepSpec& spec, std::vector<std::string> program, double min_seconds,
                                          std::uint32_t threads);

// The child's side of the protocol: the plan as its --plan argument, the result line.
std::string collective_plan_json(const std::vector<CollectiveRate>& plan);
std::vector<CollectiveRate> parse_collective_plan(const std::string& json);
std::string collective_result_line(const std::vector<probe::CollectiveResult>& results);
std::vector<probe::CollectiveResult> parse_collective_results(const std::string& stdout_text);

}  // namespace tune
