#include "train/memory/arena.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <stdexcept>

#include <fmt/format.h>

#include "core/flat_buffer.h"
#include "train/memory/memory.h"

namespace tune::train {

namespace {

struct Span {
    std::uint64_t begin = 0, end = 0;
};

bool overlap(Span a, Span b) { return a.begin < b.end && b.begin < a.end; }

// Where buffer i of the plan sits, its rounding included.
Span place(const ArenaPlan& plan, std::size_t i) {
    return {plan.offsets[i], plan.offsets[i] + round_up(plan.bytes[i], ArenaPlan::kAlignment)};
}

}  // namespace

ArenaPlan plan_arena(const std::vector<LedgerEvent>& trace) {
    ArenaPlan plan;
    std::vector<Span> alive;  // per buffer: the events from its allocation to its release
    std::map<const void*, std::size_t> open;
    for (std::uint64_t i = 0; i < trace.size(); ++i) {
        const LedgerEvent& e = trace[i];
        if (e.kind == LedgerEvent::Kind::allocate) {
            open[e.ptr] = plan.bytes.size();
            plan.bytes.push_back(e.bytes);
            alive.push_back({i, trace.size()});  // to the end unless released
        } else if (e.kind == LedgerEvent::Kind::release) {
            // A buffer from before the trace, freed inside it, has no place in the plan.
            if (const auto it = open.find(e.ptr); it != open.end()) {
                alive[it->second].end = i;
                open.erase(it);
            }
        }
    }
    std::vector<std::size_t> order(plan.bytes.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return plan.bytes[a] > plan.bytes[b]; });
    plan.offsets.assign(plan.bytes.size(), 0);
    std::vector<std::size_t> placed;
    for (const std::size_t i : order) {
        std::vector<Span> taken;  // the places of buffers alive beside it, by offset
        for (const std::size_t j : placed)
            if (overlap(alive[i], alive[j])) taken.push_back(place(plan, j));
        std::sort(taken.begin(), taken.end(), [](Span a, Span b) { return a.begin < b.begin; });
        const std::uint64_t size = round_up(plan.bytes[i], ArenaPlan::kAlignment);
        std::uint64_t at = 0;
        for (const Span s : taken) {
            if (s.begin >= at + size) break;
            at = std::max(at, s.end);
        }
        plan.offsets[i] = at;
        plan.extent = std::max(plan.extent, at + size);
        placed.push_back(i);
    }
    return plan;
}

void* Arena::take(std::uint64_t bytes) {
    if (next_ >= plan_.bytes.size() || plan_.bytes[next_] != bytes)
        throw std::logic_error(
            fmt::format("arena: request {} of {} bytes is not the planned run's ({}): the graph's "
                        "allocations differ from the run it was planned on",
                        next_ + 1, bytes,
                        next_ < plan_.bytes.size() ? fmt::format("{} bytes", plan_.bytes[next_])
                                                   : std::string("no more requests")));
    for (const std::size_t j : live_)
        if (overlap(place(plan_, next_), place(plan_, j)))
            throw std::logic_error(
                fmt::format("arena: request {} would overlap request {}, still alive: the graph's "
                            "buffers live longer than in the run it was planned on",
                            next_ + 1, j + 1));
    live_.push_back(next_);
    return base_ + plan_.offsets[next_++];
}

void Arena::give(const void* ptr) {
    const auto offset = static_cast<std::uint64_t>(static_cast<const unsigned char*>(ptr) - base_);
    const auto it = std::find_if(live_.begin(), live_.end(), [&](std::size_t j) { return plan_.offsets[j] == offset; });
    if (it != live_.end()) live_.erase(it);
}

}  // namespace tune::train
