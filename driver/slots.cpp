#include "driver/slots.h"

#include <algorithm>

#include <fmt/format.h>

namespace tune {
namespace {

// The first `n` names of `have`, numbered on past its end (a declared count larger than what was detected).
std::vector<std::string> first_gpus(const std::vector<std::string>& have, std::uint32_t n) {
    std::vector<std::string> out(have.begin(), have.begin() + std::min<std::size_t>(have.size(), n));
    for (std::size_t i = out.size(); i < n; ++i) out.push_back(std::to_string(i));
    return out;
}

std::vector<int> first_cores(const std::vector<int>& have, std::uint32_t n) {
    std::vector<int> out(have.begin(), have.begin() + std::min<std::size_t>(have.size(), n));
    for (std::size_t i = out.size(); i < n; ++i) out.push_back(static_cast<int>(i));
    return out;
}

// Trials that fit side by side: per node when a trial takes one node, whole nodes otherwise.
std::uint32_t fitting(std::uint32_t per_node_capacity, std::uint32_t per_trial, std::uint32_t nodes,
                      const SweepSpec& spec) {
    if (spec.nodes <= 1) return nodes * (per_node_capacity / std::max(1u, per_trial));
    return nodes / spec.nodes;
}

void layout_gpus(const SweepSpec& spec, const Allocation& a, std::uint32_t nodes, std::uint32_t count,
                 SlotLayout& out) {
    const std::uint32_t per_node = spec.resources.gpus_per_node.value_or(static_cast<std::uint32_t>(a.gpus.size()));
    out.threads_per_rank = 1;
    const std::vector<std::string> gpus = first_gpus(a.gpus, per_node);
    for (std::uint32_t i = 0; i < count; ++i) {
        StepResources r{spec.nodes, spec.world_size(), spec.gpus, 1, {}, {}};
        // Locally each slot sees its own GPUs; Slurm hands a step its GPUs itself.
        if (!a.in_slurm && spec.resources.declared)
            r.gpus.assign(gpus.begin() + std::min<std::size_t>(gpus.size(), i * spec.gpus),
                          gpus.begin() + std::min<std::size_t>(gpus.size(), (i + 1) * spec.gpus));
        out.slots.push_back(std::move(r));
    }
    out.description =
        fmt::format("{} at a time: {} GPU(s) per node on {} node(s), {} per trial", count, per_node, nodes, spec.gpus);
}

void layout_cpus(const SweepSpec& spec, const Allocation& a, std::uint32_t nodes, std::uint32_t count,
                 SlotLayout& out) {
    const std::uint32_t cores = spec.resources.cpus.value_or(static_cast<std::uint32_t>(a.cpus.size()));
    const std::vector<int> list = first_cores(a.cpus, cores);
    // Per node: the trials placed on one node share its cores.
    const std::uint32_t on_node = spec.nodes <= 1 ? std::max(1u, count / std::max(1u, nodes)) : 1;
    const std::uint32_t per_trial = std::max(1u, cores / on_node);
    out.threads_per_rank = std::max(1u, per_trial / std::max(1u, spec.gpus));
    for (std::uint32_t i = 0; i < count; ++i) {
        StepResources r{spec.nodes, spec.world_size(), 0, out.threads_per_rank, {}, {}};
        if (!a.in_slurm && spec.resources.declared) {
            const std::uint32_t first = (i % on_node) * per_trial;
            r.cpus.assign(list.begin() + std::min<std::size_t>(list.size(), first),
                          list.begin() + std::min<std::size_t>(list.size(), first + per_trial));
        }
        out.slots.push_back(std::move(r));
    }
    out.description =
        fmt::format("{} at a time: {} core(s) per node on {} node(s), {} per trial", count, cores, nodes, per_trial);
}

}  // namespace

SlotLayout slot_layout(const SweepSpec& spec, const Allocation& a) {
    SlotLayout out;
    out.launcher = step_launcher(spec.trial.launcher, spec.world_size(), a.in_slurm);
    // Outside Slurm every trial runs on this host, whatever the section says about nodes.
    const std::uint32_t nodes = a.in_slurm ? spec.resources.nodes.value_or(a.nodes) : 1;
    out.nodes = nodes;
    const bool gpu = spec.hardware.backend == BackendKind::cuda;
    std::uint32_t count = 1;
    if (spec.resources.declared) {
        const std::uint32_t capacity =
            gpu ? spec.resources.gpus_per_node.value_or(static_cast<std::uint32_t>(a.gpus.size()))
                : spec.resources.cpus.value_or(static_cast<std::uint32_t>(a.cpus.size()));
        // A CPU rank needs a core; a GPU rank its GPU.
        count = std::max(1u, fitting(capacity, spec.gpus, nodes, spec));
        if (spec.resources.max_concurrent) count = std::min(count, *spec.resources.max_concurrent);
    }
    if (gpu)
        layout_gpus(spec, a, nodes, count, out);
    else
        layout_cpus(spec, a, nodes, count, out);
    return out;
}

}  // namespace tune
