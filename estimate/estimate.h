// The analytic estimator: per-rank memory by component at the peak of a
// step, step time, tokens/s, MFU, and whether it fits. Closed form, no
// trainer code: docs/memory-model.md is the schedule it computes.
#pragma once

#include "core/config.h"
#include "estimate/estimate_memory.h"
#include "estimate/estimate_options.h"
#include "estimate/estimate_time.h"

namespace tune {

// The bytes a rank may fill: the limit less the margin.
std::uint64_t usable_bytes(const TrialConfig& c, const Hardware& hw, const EstimateOptions& o);

// The host bytes a node may fill for offloaded states: host_memory less the margin; unset: unbounded.
std::optional<std::uint64_t> usable_host_bytes(std::optional<std::uint64_t> host_memory, double margin);

// The bytes a memory limit applies to. On a GPU, everything on the device. On
// the CPU backend the tagged allocator enforces the limit, so the process's
// baseline (the `overhead` component there) lies outside it.
std::uint64_t limited_bytes(const MemoryBreakdown& m, const Hardware& hw);
// The parameters that train: every one, or with LoRA and QLoRA the adapters' (padded as the trainer lays them out).
std::uint64_t trained_parameters(const ModelSpec& model, const TrialConfig& c);

// `model` stands in for c.model (a sweep holds one ModelSpec for all its configs).
Estimate estimate(const ModelSpec& model, const TrialConfig& c, const Hardware& hw, const EstimateOptions& o = {});
inline Estimate estimate(const TrialConfig& c, const Hardware& hw, const EstimateOptions& o = {}) {
    return estimate(c.model, c, hw, o);
}

}  // namespace tune
