// The search space of a sweep, enumerated: every combination of the [space]
// lists as a TrialConfig, and for each one whether the engine can express it.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/config.h"
#include "core/validity.h"
#include "sweep/spec.h"

namespace tune {

struct Candidate {
    TrialConfig config;
    std::string invalid_reason;     // empty when the engine can run it
    std::string_view invalid_kind;  // short stable tag of the reason, for counting
    bool valid() const { return invalid_reason.empty(); }
};

// Every combination, in grid order: the outer loops change what is most
// expensive to change between trials (precision, ZeRO stage, optimizer), the
// inner ones what is cheapest (micro-batch, accumulation).
std::vector<Candidate> expand_space(const SweepSpec& spec);

// Why this configuration cannot run in this sweep, or nullopt when it can:
// the engine's rules (core/validity.h), the sweep's [constraints], then what
// its [framework] can run (kind "framework").
std::optional<Invalidity> check_validity(const TrialConfig& config, const SweepSpec& spec);

// The configuration every trial of the sweep starts from: model, world size,
// [trial] settings; the [space] dimensions are then set per combination.
TrialConfig base_config(const SweepSpec& spec);

struct SpaceCounts {
    std::uint64_t total = 0;
    std::uint64_t valid = 0;
    struct Group {
        std::uint64_t count = 0;
        std::string example;  // one reason of this kind, as the user will see it
    };
    std::map<std::string, Group, std::less<>> invalid;  // by kind
};
SpaceCounts count(const std::vector<Candidate>& candidates);

}  // namespace tune
