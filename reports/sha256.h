// SHA-256 (FIPS 180-4) and base64, for the report's Content-Security-Policy:
// each inline script is allowed by the hash of its text, so a script that
// found its way into the page some other way would not run.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace tune {

std::array<std::uint8_t, 32> sha256(std::string_view bytes);

std::string base64(const std::uint8_t* bytes, std::size_t size);

// "'sha256-<base64 digest>'" as CSP source expressions write it.
std::string csp_hash_source(std::string_view script);

}  // namespace tune
