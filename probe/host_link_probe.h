// The host link probe (estimate/probed_rates.h HostLinkRate): one copy of a
// layer's parameter shard from the host's pinned memory (Backend::allocate_host)
// to the device, as offload's gathers make it (train/model_state.cpp gather_flat).
#pragma once

#include "estimate/probed_rates.h"
#include "kernels/backend.h"
#include "probe/probe_timing.h"

namespace tune::probe {

// Bytes per second host to device (the rate's bytes_per_s); `spent`: the probe's whole run.
double probe_host_link(kernels::Backend& backend, const HostLinkRate& rate, const ProbeSettings& s, double* spent);

}  // namespace tune::probe
