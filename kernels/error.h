// Typed errors raised by the backends (and by the trainer's allocator, which
// wraps Backend::allocate). The trial boundary maps OutOfMemoryError to status
// `oom` and anything else to `failed`.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace tune {

// A backend call failed or was called with arguments it cannot honour
// (bad shape, unsupported dtype, workspace too small). Carries where.
class BackendError : public std::runtime_error {
public:
    explicit BackendError(const std::string& message) : std::runtime_error(message) {}
};

// An allocation could not be satisfied: `requested` bytes were asked for while
// `live` bytes were held (by whoever raises it: the backend counts its own
// allocations, the trainer's allocator counts all tagged buffers).
class OutOfMemoryError : public std::runtime_error {
public:
    OutOfMemoryError(std::uint64_t requested, std::uint64_t live, const std::string& detail = {})
        : std::runtime_error(message(requested, live, detail)), requested_(requested), live_(live) {}

    std::uint64_t requested() const { return requested_; }
    std::uint64_t live() const { return live_; }

private:
    static std::string message(std::uint64_t requested, std::uint64_t live, const std::string& detail) {
        std::string text = "out of memory: requested " + std::to_string(requested) + " bytes with " +
                           std::to_string(live) + " bytes live";
        return detail.empty() ? text : text + " (" + detail + ")";
    }

    std::uint64_t requested_;
    std::uint64_t live_;
};

}  // namespace tune
