// Fixed places for a recorded graph's buffers. A CUDA graph replays its
// kernels with the pointers they were recorded with, so every buffer a
// micro-batch allocates must sit at the same address at every replay: the
// trainer reserves one arena and places them in it, by offset, instead of
// asking the stream-ordered pool (whose allocations, captured, would become
// graph memory nodes in a second pool the trial's real peak does not see).
// The places are planned once, from an eager run's ledger trace, where every
// buffer's size and lifetime is known: largest first, each at the lowest
// offset no buffer alive beside it holds (greedy by size, as TFLite's and
// XLA's buffer planners do). Recording then takes them in order.
#pragma once

#include <cstdint>
#include <vector>

namespace tune::train {

struct LedgerEvent;

// The trace's buffers in the order they were allocated: their sizes and places.
struct ArenaPlan {
    static constexpr std::uint64_t kAlignment = 256;  // as Backend::allocate's buffers
    std::vector<std::uint64_t> bytes, offsets;
    std::uint64_t extent = 0;  // the arena's bytes
};
ArenaPlan plan_arena(const std::vector<LedgerEvent>& trace);

// The plan's places over memory at `base`, taken request by request. A request
// that differs from the plan (its size, or a place a buffer still alive holds)
// raises std::logic_error: the graph would not be the run that was planned.
class Arena {
public:
    Arena(void* base, const ArenaPlan& plan) : base_(static_cast<unsigned char*>(base)), plan_(plan) {}
    void* take(std::uint64_t bytes);
    void give(const void* ptr);
    bool holds(const void* ptr) const {
        const auto* p = static_cast<const unsigned char*>(ptr);
        return p >= base_ && p < base_ + plan_.extent;
    }

private:
    unsigned char* base_;
    const ArenaPlan& plan_;
    std::size_t next_ = 0;
    std::vector<std::size_t> live_;  // plan indices taken and not given back
};

}  // namespace tune::train
