#include "core/pipeline_schedule.h"

#include <algorithm>
#include <limits>
#include <map>
#include <stdexcept>
#include <tuple>

#include <fmt/format.h>

namespace tune {
namespace {

// 1F1B on stage `stage`: warm-up forwards, then forward and backward in turn, then the rest backward.
std::vector<PipelineStep> one_f_one_b(std::uint32_t stages, std::uint32_t stage, std::uint32_t m) {
    const std::uint32_t warmup = std::min(stages - stage - 1, m);
    std::vector<PipelineStep> out;
    std::uint32_t forward = 0, backward = 0;
    for (; forward < warmup; ++forward) out.push_back({forward, 0, false});
    while (forward < m) {
        out.push_back({forward++, 0, false});
        out.push_back({backward++, 0, true});
    }
    while (backward < m) out.push_back({backward++, 0, true});
    return out;
}

// Megatron's k-th forward (or backward) of a stage under interleaving: micro-batches in groups of p, each
// group through every chunk in turn (backward through the chunks in reverse).
PipelineStep interleaved_step(std::uint32_t k, std::uint32_t p, std::uint32_t v, bool backward) {
    const std::uint32_t in_group = k % (p * v);
    std::uint32_t chunk = in_group / p;
    if (backward) chunk = v - 1 - chunk;
    return {k / (p * v) * p + k % p, chunk, backward};
}

std::vector<PipelineStep> interleaved(std::uint32_t p, std::uint32_t v, std::uint32_t stage, std::uint32_t m) {
    const std::uint32_t total = m * v;
    // With as many micro-batches as stages every forward runs first (Megatron's all_warmup_microbatches).
    const std::uint32_t warmup = m == p ? total : std::min((p - stage - 1) * 2 + (v - 1) * p, total);
    std::vector<PipelineStep> out;
    std::uint32_t forward = 0, backward = 0;
    for (; forward < warmup; ++forward) out.push_back(interleaved_step(forward, p, v, false));
    while (forward < total) {
        out.push_back(interleaved_step(forward++, p, v, false));
        out.push_back(interleaved_step(backward++, p, v, true));
    }
    while (backward < total) out.push_back(interleaved_step(backward++, p, v, true));
    return out;
}

// The step another one waits for, as (stage, micro-batch, chunk, backward); none for the first forward.
struct Dependency {
    std::uint32_t stage, micro_batch, chunk;
    bool backward;
};
std::optional<Dependency> dependency(const PipelineTable& t, std::uint32_t stage, const PipelineStep& s) {
    const std::uint32_t g = t.virtual_stage(stage, s.chunk), last = t.stages * t.virtual_stages - 1;
    const auto at = [&](std::uint32_t vs, bool backward) {
        return Dependency{vs % t.stages, s.micro_batch, vs / t.stages, backward};
    };
    if (!s.backward) return g == 0 ? std::nullopt : std::optional(at(g - 1, false));
    return g == last ? at(g, false) : at(g + 1, true);
}

}  // namespace

std::optional<std::string> pipeline_schedule_problem(PipelineSchedule s, std::uint32_t p, std::uint32_t v,
                                                     std::uint32_t m) {
    if (p == 0 || v == 0 || m == 0) return "pipeline stages, virtual stages and micro-batches must be at least 1";
    if (p > 1 && m < p)
        return fmt::format(
            "{} micro-batches (grad_accum) cannot fill {} pipeline stages: grad_accum must be at "
            "least pipeline_parallel",
            m, p);
    if (s == PipelineSchedule::one_f_one_b && v != 1)
        return fmt::format(
            "the 1f1b schedule runs one model chunk per stage, not virtual_stages = {}: use "
            "pipeline_schedule = \"interleaved\"",
            v);
    if (s == PipelineSchedule::interleaved) {
        if (v < 2) return "the interleaved schedule needs virtual_stages of at least 2";
        if (p < 2) return "the interleaved schedule needs pipeline_parallel of at least 2";
        if (m % p != 0)
            return fmt::format(
                "the interleaved schedule runs micro-batches in groups of the {} stages; grad_accum "
                "{} is not a multiple (Megatron-Core refuses it too)",
                p, m);
    }
    return std::nullopt;
}

PipelineTable pipeline_table(PipelineSchedule s, std::uint32_t p, std::uint32_t v, std::uint32_t m) {
    if (const auto problem = pipeline_schedule_problem(s, p, v, m)) throw std::invalid_argument(*problem);
    PipelineTable t{p, v, m, {}};
    for (std::uint32_t stage = 0; stage < p; ++stage)
        t.steps.push_back(s == PipelineSchedule::one_f_one_b ? one_f_one_b(p, stage, m) : interleaved(p, v, stage, m));
    return t;
}

std::vector<std::uint32_t> peak_in_flight(const PipelineTable& t) {
    std::vector<std::uint32_t> peaks;
    for (const auto& steps : t.steps) {
        std::uint32_t held = 0, most = 0;
        for (const PipelineStep& s : steps) {
            held = s.backward ? held - 1 : held + 1;
            most = std::max(most, held);
        }
        peaks.push_back(most);
    }
    return peaks;
}

PipelineTiming time_pipeline(const PipelineTable& t, double forward_s, double backward_s, double hop_s) {
    const std::vector<double> forward(std::size_t{t.stages} * t.virtual_stages, forward_s);
    const std::vector<double> backward(forward.size(), backward_s);
    return time_pipeline(t, forward, backward, hop_s);
}

PipelineTiming time_pipeline(const PipelineTable& t, std::span<const double> forward_s,
                             std::span<const double> backward_s, double hop_s) {
    if (forward_s.size() != std::size_t{t.stages} * t.virtual_stages || backward_s.size() != forward_s.size())
        throw std::invalid_argument("time_pipeline needs one forward and one backward time per virtual stage");
    // End times of the steps run so far, by (stage, micro-batch, chunk, backward).
    std::map<std::tuple<std::uint32_t, std::uint32_t, std::uint32_t, bool>, double> ended;
    std::vector<std::size_t> next(t.stages, 0);
    std::vector<double> free_at(t.stages, 0.0);
    PipelineTiming out;
    out.busy_s.assign(t.stages, 0.0);
    for (bool progress = true; progress;) {
        progress = false;
        for (std::uint32_t stage = 0; stage < t.stages; ++stage) {
            while (next[stage] < t.steps[stage].size()) {
                const PipelineStep& s = t.steps[stage][next[stage]];
                double ready = free_at[stage];
                if (const auto d = dependency(t, stage, s)) {
                    const auto it = ended.find({d->stage, d->micro_batch, d->chunk, d->backward});
                    if (it == ended.end()) break;  // its input is not made yet: another stage goes first
                    ready = std::max(ready, it->second + (d->stage != stage ? hop_s : 0.0));
                }
                const std::size_t g = t.virtual_stage(stage, s.chunk);
                const double took = s.backward ? backward_s[g] : forward_s[g];
                free_at[stage] = ready + took;
                out.busy_s[stage] += took;
                ended[{stage, s.micro_batch, s.chunk, s.backward}] = free_at[stage];
                ++next[stage];
                progress = true;
            }
        }
    }
    for (std::uint32_t stage = 0; stage < t.stages; ++stage)
        if (next[stage] != t.steps[stage].size())
            throw std::logic_error(fmt::format("pipeline table deadlocks at stage {} step {}", stage, next[stage]));
    out.makespan_s = *std::max_element(free_at.begin(), free_at.end());
    double busy = 0;
    for (double b : out.busy_s) busy += b;
    out.bubble_fraction = out.makespan_s > 0 ? 1.0 - busy / (out.makespan_s * t.stages) : 0.0;
    return out;
}

double pipeline_bubble_closed_form(std::uint32_t p, std::uint32_t v, std::uint32_t m) {
    return static_cast<double>(p - 1) / (static_cast<double>(v) * m + p - 1);
}

}  // namespace tune
