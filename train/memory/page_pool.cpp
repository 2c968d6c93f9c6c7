#include "train/memory/page_pool.h"

#include <algorithm>

#include "kernels/error.h"

namespace tune::train {

PagePool::~PagePool() { trim(0); }

std::uint64_t PagePool::whole_pages(std::uint64_t bytes) const {
    const std::uint64_t page = mapper_.page_bytes();
    return (bytes + page - 1) / page * page;
}

void* PagePool::take(std::uint64_t bytes, std::uint64_t keep_at_most, std::uint64_t live) {
    const std::uint64_t need = whole_pages(bytes);
    if (std::optional<Block> kept = take_fitting(need)) {  // nothing new; a larger block's tail stays kept
        if (kept->bytes > need) keep(static_cast<unsigned char*>(kept->ptr) + need, kept->bytes - need);
        in_use_ += need;
        return kept->ptr;
    }
    auto* range = static_cast<unsigned char*>(mapper_.reserve(need));
    if (range == nullptr) {
        trim(keep_at_most);
        throw OutOfMemoryError(bytes, live, "no address range left for a page-mapped buffer");
    }
    const std::uint64_t moved = move_kept_into(range, need);
    trim(keep_at_most);  // before fresh pages are backed: a device holds those at once
    bool backed = mapper_.back(range + moved, need - moved);
    if (!backed) {  // kept pages are in no one's use: a device out of fresh ones gets them back first
        trim(0);
        backed = mapper_.back(range + moved, need - moved);
    }
    if (!backed) {
        mapper_.release(range, need);
        throw OutOfMemoryError(bytes, live, "no pages left for a page-mapped buffer");
    }
    mapped_ += need - moved;
    moved_ += moved;
    in_use_ += need;
    held_high_ = std::max(held_high_, in_use_ + kept_);
    return range;
}

std::optional<PagePool::Block> PagePool::take_fitting(std::uint64_t need) {
    // The best fit: the smallest block of at least `need`, the newest of equals.
    auto best = blocks_.end();
    for (auto b = blocks_.begin(); b != blocks_.end(); ++b)
        if (b->bytes >= need && (best == blocks_.end() || b->bytes <= best->bytes)) best = b;
    if (best == blocks_.end()) return std::nullopt;
    const Block block = *best;
    blocks_.erase(best);
    kept_ -= block.bytes;
    return block;
}

std::uint64_t PagePool::move_kept_into(unsigned char* range, std::uint64_t need) {
    std::uint64_t filled = 0;
    while (filled < need && !blocks_.empty()) {
        const auto largest = std::max_element(blocks_.begin(), blocks_.end(),
                                              [](const Block& a, const Block& b) { return a.bytes < b.bytes; });
        const std::uint64_t move = std::min(largest->bytes, need - filled);
        if (!mapper_.move(largest->ptr, range + filled, move)) break;  // the rest gets fresh pages
        filled += move;
        kept_ -= move;
        if (move < largest->bytes) {
            largest->ptr = static_cast<unsigned char*>(largest->ptr) + move;
            largest->bytes -= move;
        } else {
            blocks_.erase(largest);
        }
    }
    return filled;
}

void PagePool::give(void* ptr, std::uint64_t bytes) noexcept {
    in_use_ -= whole_pages(bytes);
    keep(ptr, bytes);
}

void PagePool::keep(void* ptr, std::uint64_t bytes) noexcept {
    const std::uint64_t mapped = whole_pages(bytes);
    try {
        blocks_.push_back({ptr, mapped});
        kept_ += mapped;
    } catch (...) {  // no room to remember it: hand it back instead
        mapper_.release(ptr, mapped);
    }
}

void PagePool::trim(std::uint64_t bytes) noexcept {
    // The oldest kept pages go first: a step frees its first buffers last.
    std::size_t dropped = 0;
    while (kept_ > bytes && dropped < blocks_.size()) {
        Block& oldest = blocks_[dropped];
        const std::uint64_t excess = whole_pages(kept_ - bytes);
        if (excess < oldest.bytes) {
            mapper_.release(static_cast<unsigned char*>(oldest.ptr) + oldest.bytes - excess, excess);
            oldest.bytes -= excess;
            kept_ -= excess;
            break;
        }
        mapper_.release(oldest.ptr, oldest.bytes);
        kept_ -= oldest.bytes;
        ++dropped;
    }
    blocks_.erase(blocks_.begin(), blocks_.begin() + static_cast<std::ptrdiff_t>(dropped));
}

}  // namespace tune::train
