// Values the engine runs identically to another value of the same dimension,
// given the rest of the configuration: a sweep runs such a pair once, and
// `tune validate` says which values collapsed and why. Only the engine's own
// identities belong here (a framework that runs the two differently would
// keep both).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core/config.h"

namespace tune {

// The Candidate/Invalidity kind a collapsed configuration carries.
inline constexpr std::string_view kCollapsedKind = "collapsed";

struct Collapse {
    TrialConfig same_as;  // the configuration that runs in its place
    std::string why;
};

// The configuration `c` runs identically to, or nullopt when it is its own.
std::optional<Collapse> collapsed(const TrialConfig& c);

}  // namespace tune
