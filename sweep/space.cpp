#include "sweep/space.h"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <unordered_set>

#include <fmt/format.h>

#include "core/collapsed_values.h"
#include "core/parallel_plan.h"
#include "estimate/frameworks/framework_profile.h"

namespace tune {

TrialConfig base_config(const SweepSpec& spec) {
    TrialConfig c;
    c.model = spec.model;
    c.world_size = spec.world_size();
    const TrialSettings& t = spec.trial;
    c.steps = t.steps;
    c.warmup = t.warmup;
    c.seed = t.seed;
    c.lr = t.lr;
    c.weight_decay = t.weight_decay;
    c.clip = t.clip;
    c.neftune_alpha = t.neftune_alpha;
    c.adam8bit_block = t.adam8bit_block;
    c.beta1 = t.beta1;
    c.beta2 = t.beta2;
    c.eps = t.eps;
    c.lora_alpha = t.lora_alpha;
    // An explicit limit is enforced by the trial's allocator; "auto" leaves the device's own.
    c.memory_limit = spec.memory_limit_setting.value_or(0);
    return c;
}

std::optional<Invalidity> check_validity(const TrialConfig& c, const SweepSpec& spec) {
    if (auto bad = invalid_reason(c)) return bad;
    if (spec.max_world_size && parallel_plan(c).world() > *spec.max_world_size)
        return Invalidity{"world-size", fmt::format("world size {} exceeds [constraints] max_world_size {}",
                                                    parallel_plan(c).world(), *spec.max_world_size)};
    // The plan's rules that need the node: the sweep knows its ranks per node.
    const std::uint32_t node = std::min(spec.gpus, spec.resources.gpus_per_node.value_or(spec.gpus));
    if (auto bad = parallel_plan_problem(parallel_plan(c), c.model, c.context, node)) return bad;
    if (spec.global_batch_tokens) {
        // Per replica: the tensor-parallel ranks of one replica share its tokens.
        const std::uint64_t tokens = std::uint64_t{c.micro_batch} * c.grad_accum * parallel_plan(c).dp * c.context;
        if (tokens != *spec.global_batch_tokens)
            return Invalidity{"global-batch",
                              fmt::format("global batch of {} tokens differs from [constraints] global_batch_tokens {}",
                                          tokens, *spec.global_batch_tokens)};
    }
    // The stack the user trains with ([framework]) runs only what it can (estimate/frameworks/framework_validity).
    if (auto problem = framework_problem(spec.framework, c))
        return Invalidity{"framework",
                          fmt::format("[framework] {} cannot run it: {}", to_string(spec.framework), *problem)};
    return std::nullopt;
}

const std::vector<DimValue>& SpaceSpec::of(std::string_view dimension) const {
    for (std::size_t i = 0; i < kDimensionCount; ++i)
        if (dimensions()[i].name == dimension) return values[i];
    throw std::invalid_argument(fmt::format("no search dimension named \"{}\"", dimension));
}

std::uint64_t SpaceSpec::size() const {
    std::uint64_t n = 1;
    for (const auto& v : values) {
        if (v.empty()) return 0;
        if (n > std::numeric_limits<std::uint64_t>::max() / v.size()) return std::numeric_limits<std::uint64_t>::max();
        n *= v.size();
    }
    return n;
}

namespace {

// A valid candidate the engine runs identically to another valid one of the space (core/collapsed_values)
// is not run again: it carries the other's summary and why.
void mark_collapsed(std::vector<Candidate>& candidates) {
    std::unordered_set<std::string> runnable;
    for (const Candidate& c : candidates)
        if (c.valid()) runnable.insert(config_hash(c.config));
    for (Candidate& c : candidates) {
        if (!c.valid()) continue;
        const auto collapse = collapsed(c.config);
        if (!collapse || !runnable.contains(config_hash(collapse->same_as))) continue;
        c.invalid_kind = kCollapsedKind;
        c.invalid_reason = fmt::format("the same run as {}: {}", summary(collapse->same_as), collapse->why);
    }
}

}  // namespace

std::vector<Candidate> expand_space(const SweepSpec& spec) {
    const SpaceSpec& s = spec.space;
    std::vector<Candidate> out;
    const std::uint64_t n = s.size();
    if (n == 0) return out;
    out.reserve(n);
    // An odometer over the dimensions in grid order: the last (innermost) digit turns fastest.
    const auto& order = grid_order();
    std::array<std::size_t, kDimensionCount> digit{};
    TrialConfig c = base_config(spec);
    const TrialConfig defaults;
    for (std::uint64_t k = 0; k < n; ++k) {
        for (std::size_t i = 0; i < kDimensionCount; ++i) dimensions()[i].set(c, s.values[i][digit[i]]);
        // A dimension that means nothing here (a rank with method full) is
        // enumerated once, at the default, so equal trials are not repeated.
        bool repeat = false;
        for (std::size_t i = 0; i < kDimensionCount; ++i) {
            const Dimension& d = dimensions()[i];
            if (d.applies_to(c)) continue;
            repeat = repeat || digit[i] != 0;
            d.set(c, d.get(defaults));
        }
        if (!repeat) {
            Candidate candidate{c, {}, {}};
            if (auto bad = check_validity(c, spec)) {
                candidate.invalid_reason = std::move(bad->reason);
                candidate.invalid_kind = bad->kind;
            }
            out.push_back(std::move(candidate));
        }
        for (std::size_t r = kDimensionCount; r-- > 0;) {
            const std::size_t d = order[r];
            if (++digit[d] < s.values[d].size()) break;
            digit[d] = 0;
        }
    }
    mark_collapsed(out);
    return out;
}

SpaceCounts count(const std::vector<Candidate>& candidates) {
    SpaceCounts counts;
    counts.total = candidates.size();
    for (const Candidate& c : candidates) {
        if (c.valid()) {
            ++counts.valid;
            continue;
        }
        auto& group = counts.invalid[std::string(c.invalid_kind)];
        if (group.count++ == 0) group.example = c.invalid_reason;
    }
    return counts;
}

}  // namespace tune
