// Versions of the libraries under a stack whose memory rules changed between
// releases. A sweep names them in [framework] (`bitsandbytes = "0.42.0"`);
// unset, a stack is modelled at its libraries' current behaviour.
#pragma once

#include <compare>
#include <optional>
#include <string>
#include <string_view>

namespace tune {

struct Version {
    int major = 0, minor = 0, patch = 0;
    auto operator<=>(const Version&) const = default;
};

// "0.43.1", "0.42" (patch 0) or "1"; nullopt for anything else, a suffix included.
std::optional<Version> parse_version(std::string_view text);
std::string to_string(const Version& v);

struct LibraryVersions {
    // Unset: a release after 0.43.1.
    std::optional<Version> bitsandbytes;

    // bitsandbytes' MatMul4Bit.forward (autograd/_functions.py) keeps its input
    // on ctx for backward before 0.43.2 (`ctx.tensors = (A, B)`; PR #1270 keeps
    // (None, B)), though a frozen 4-bit weight's backward never reads it.
    bool bnb_keeps_matmul_inputs() const { return bitsandbytes && *bitsandbytes < Version{0, 43, 2}; }
};

}  // namespace tune
