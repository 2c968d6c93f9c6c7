// Fixed places for a recorded graph's buffers. A CUDA graph replays its
// kernels with the pointers they were captured with, so every buffer a
// micro-batch allocates must sit at the same address at every replay: the
// trainer reserves one arena and places them in it, by offset, instead of
// asking the stream-ordered pool (whose allocations, captured, would become
// graph memory nodes in a second pool the trial's real peak does not see).
// Offsets follow best fit over the freed ranges, so one sequence of requests
// always lands at the same offsets: planned once from an eager run's ledger
// trace (plan), then taken again, bound to the arena, while capturing.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

namespace tune::harness {

class Arena {
public:
    static constexpr std::uint64_t kAlignment = 256;  // as Backend::allocate's buffers

    // Unbounded: take() grows the extent (planning).
    Arena() = default;
    // Bound to `bytes` at `base`: a request past them raises std::logic_error.
    Arena(void* base, std::uint64_t bytes) : base_(static_cast<unsigned char*>(base)), bound_(bytes) {}

    // Where a buffer of `bytes` goes: the smallest freed range that holds it, else the end.
    std::uint64_t take(std::uint64_t bytes);
    void give(std::uint64_t offset, std::uint64_t bytes);
    // The most bytes from the start ever in use at once, rounding included.
    std::uint64_t extent() const { return extent_; }
    void* at(std::uint64_t offset) const { return base_ + offset; }
    std::uint64_t offset_of(const void* ptr) const {
        return static_cast<std::uint64_t>(static_cast<const unsigned char*>(ptr) - base_);
    }
    bool bound() const { return base_ != nullptr; }
    bool holds(const void* ptr) const {
        const auto* p = static_cast<const unsigned char*>(ptr);
        return bound() && p >= base_ && p < base_ + bound_;
    }

private:
    unsigned char* base_ = nullptr;
    std::uint64_t bound_ = 0;
    std::uint64_t extent_ = 0;
    std::uint64_t end_ = 0;                        // one past the last byte in use or freed
    std::map<std::uint64_t, std::uint64_t> free_;  // offset -> bytes, below end_, coalesced
};

}  // namespace tune::harness
