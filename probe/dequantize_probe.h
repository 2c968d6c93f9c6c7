// The NF4 dequantization probe (estimate/probed_rates.h DequantizeRate): one
// QLoRA layer's seven matrices dequantized into the compute dtype, each in its
// own call, as train/model.cpp LlamaLayer::weight does before each GEMM that
// reads a base weight.
#pragma once

#include "estimate/probed_rates.h"
#include "kernels/backend.h"
#include "probe/probe_timing.h"

namespace tune::probe {

// Seconds per pass over the layer's matrices (the rate's layer_s); `spent`: the probe's whole run.
double probe_dequantize(kernels::Backend& backend, const DequantizeRate& rate, const ProbeSettings& s, double* spent);

}  // namespace tune::probe
