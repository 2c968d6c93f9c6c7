// The optimizer probe: one step's update of an optimizer over the tensors of
// an OptimizerRate (estimate/optimizer_rates.cpp picks them: a layer's and the
// outer buffer's, or a layer's adapters), with the backend calls the trainer
// makes (train/optimizer_state.cpp), in its precision's dtypes.
#pragma once

#include "estimate/probed_rates.h"
#include "kernels/backend.h"
#include "probe/probe_timing.h"

namespace tune::probe {

// Seconds per pass over r.tensors; `spent` receives how long the probe ran.
double probe_optimizer(kernels::Backend& backend, const OptimizerRate& r, const ProbeSettings& s, double* spent);

}  // namespace tune::probe
