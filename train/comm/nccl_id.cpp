#include "train/comm/nccl_id.h"

#include <cstdlib>

#include <fmt/format.h>

#include "train/comm/comm_error.h"

namespace tune::train {
namespace {

int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

}  // namespace

std::string encode_nccl_id(const NcclId& id) {
    static constexpr char kDigits[] = "0123456789abcdef";
    std::string out;
    out.reserve(2 * id.size());
    for (const std::uint8_t b : id) {
        out.push_back(kDigits[b >> 4]);
        out.push_back(kDigits[b & 0xF]);
    }
    return out;
}

NcclId decode_nccl_id(std::string_view hex, std::string_view source) {
    if (hex.size() != 2 * kNcclIdBytes)
        throw CommError(fmt::format("{}: an NCCL id is {} hex digits ({} bytes), got {} characters", source,
                                    2 * kNcclIdBytes, kNcclIdBytes, hex.size()));
    NcclId id{};
    for (std::size_t i = 0; i < kNcclIdBytes; ++i) {
        const int hi = hex_value(hex[2 * i]), lo = hex_value(hex[2 * i + 1]);
        if (hi < 0 || lo < 0) {
            const std::size_t at = hi < 0 ? 2 * i : 2 * i + 1;
            throw CommError(fmt::format("{}: '{}' at position {} is not a hex digit", source, hex[at], at));
        }
        id[i] = static_cast<std::uint8_t>(hi << 4 | lo);
    }
    return id;
}

std::optional<NcclId> nccl_id_from_environment() {
    const char* value = std::getenv(kNcclIdVariable);
    if (value == nullptr || *value == '\0') return std::nullopt;
    return decode_nccl_id(value, kNcclIdVariable);
}

}  // namespace tune::train
