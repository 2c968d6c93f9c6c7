#include "harness/memory/arena.h"

#include <fmt/format.h>

#include <iterator>
#include <stdexcept>

namespace tune::harness {

namespace {

std::uint64_t rounded(std::uint64_t bytes) {
    return (bytes + Arena::kAlignment - 1) / Arena::kAlignment * Arena::kAlignment;
}

}  // namespace

std::uint64_t Arena::take(std::uint64_t bytes) {
    const std::uint64_t need = rounded(bytes);
    auto best = free_.end();
    for (auto it = free_.begin(); it != free_.end(); ++it)
        if (it->second >= need && (best == free_.end() || it->second < best->second)) best = it;
    if (best != free_.end()) {
        const std::uint64_t offset = best->first, left = best->second - need;
        free_.erase(best);
        if (left > 0) free_.emplace(offset + need, left);
        return offset;
    }
    // Nothing freed holds it: at the end, starting inside a freed range that reaches the end.
    std::uint64_t offset = end_;
    if (!free_.empty() && std::prev(free_.end())->first + std::prev(free_.end())->second == end_) {
        offset = std::prev(free_.end())->first;
        free_.erase(std::prev(free_.end()));
    }
    if (bound() && offset + need > bound_)
        throw std::logic_error(
            fmt::format("arena: {} bytes at offset {} pass its {} bytes: the graph's "
                        "allocations differ from the run it was planned on",
                        bytes, offset, bound_));
    end_ = offset + need;
    extent_ = std::max(extent_, end_);
    return offset;
}

void Arena::give(std::uint64_t offset, std::uint64_t bytes) {
    std::uint64_t size = rounded(bytes);
    auto next = free_.lower_bound(offset);
    if (next != free_.end() && next->first == offset + size) {  // joins the range after
        size += next->second;
        next = free_.erase(next);
    }
    if (next != free_.begin()) {  // joins the range before
        auto before = std::prev(next);
        if (before->first + before->second == offset) {
            before->second += size;
            return;
        }
    }
    free_.emplace(offset, size);
}

}  // namespace tune::harness
