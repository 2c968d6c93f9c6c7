#include "search/space.h"

#include <fmt/format.h>

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
    // An explicit limit is enforced by the trial's allocator; "auto" leaves the device's own.
    c.memory_limit = spec.memory_limit_setting.value_or(0);
    return c;
}

std::optional<Invalidity> check_validity(const TrialConfig& c, const SweepSpec& spec) {
    if (auto bad = invalid_reason(c)) return bad;
    if (spec.max_world_size && c.world_size > *spec.max_world_size)
        return Invalidity{"world-size", fmt::format("world size {} exceeds [constraints] max_world_size {}",
                                                    c.world_size, *spec.max_world_size)};
    if (spec.global_batch_tokens) {
        const std::uint64_t tokens = std::uint64_t{c.micro_batch} * c.grad_accum * c.world_size * c.context;
        if (tokens != *spec.global_batch_tokens)
            return Invalidity{"global-batch",
                              fmt::format("global batch of {} tokens differs from [constraints] global_batch_tokens {}",
                                          tokens, *spec.global_batch_tokens)};
    }
    return std::nullopt;
}

std::vector<Candidate> expand_space(const SweepSpec& spec) {
    const SpaceSpec& s = spec.space;
    std::vector<Candidate> out;
    out.reserve(s.size());
    TrialConfig c = base_config(spec);
    for (Precision precision : s.precisions)
        for (std::uint32_t zero : s.zero_stages)
            for (Optimizer optimizer : s.optimizers)
                for (Checkpointing ckpt : s.checkpointings)
                    for (std::uint32_t context : s.contexts)
                        for (std::uint32_t micro_batch : s.micro_batches)
                            for (std::uint32_t accum : s.grad_accums) {
                                c.precision = precision;
                                c.zero_stage = zero;
                                c.optimizer = optimizer;
                                c.checkpointing = ckpt;
                                c.context = context;
                                c.micro_batch = micro_batch;
                                c.grad_accum = accum;
                                Candidate candidate{c, {}, {}};
                                if (auto bad = check_validity(c, spec)) {
                                    candidate.invalid_reason = std::move(bad->reason);
                                    candidate.invalid_kind = bad->kind;
                                }
                                out.push_back(std::move(candidate));
                            }
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
