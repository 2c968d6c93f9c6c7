#include "harness/page_pool.h"

#include <algorithm>

#include <sys/mman.h>
#include <unistd.h>

#include "kernels/error.h"

namespace tune::harness {

namespace {

std::uint64_t whole_pages(std::uint64_t bytes) {
    static const std::uint64_t page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));  // asked once
    return (bytes + page - 1) / page * page;
}

void unmap(void* ptr, std::uint64_t bytes) noexcept {
    if (bytes > 0) ::munmap(ptr, bytes);
}

}  // namespace

PagePool::~PagePool() { trim(0); }

void* PagePool::take(std::uint64_t bytes, std::uint64_t keep_at_most, std::uint64_t live) {
    const std::uint64_t need = whole_pages(bytes);
    if (std::optional<Block> kept = take_fitting(need)) {  // no fault; a larger block's tail stays kept
        if (kept->bytes > need) give(static_cast<unsigned char*>(kept->ptr) + need, kept->bytes - need);
        return kept->ptr;
    }
    // Anonymous private pages: zero on first touch, returned by munmap.
    void* range = ::mmap(nullptr, need, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (range == MAP_FAILED) {
        trim(keep_at_most);
        throw OutOfMemoryError(bytes, live, "host allocation failed (mmap)");
    }
    const std::uint64_t moved = move_kept_into(static_cast<unsigned char*>(range), need);
    mapped_ += need - moved;
    trim(keep_at_most);
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
        // Same size, to a fixed address: the page-table entries move, the pages stay resident.
        // A block assembled from moved pieces may span several mappings, which older
        // kernels refuse to move (EFAULT): what it would have filled then faults in.
        if (::mremap(largest->ptr, move, move, MREMAP_MAYMOVE | MREMAP_FIXED, range + filled) == MAP_FAILED) break;
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
    const std::uint64_t mapped = whole_pages(bytes);
    try {
        blocks_.push_back({ptr, mapped});
        kept_ += mapped;
    } catch (...) {  // no room to remember it: hand it back instead
        unmap(ptr, mapped);
    }
}

void PagePool::trim(std::uint64_t bytes) noexcept {
    // The oldest kept pages go first: a step frees its first buffers last.
    std::size_t dropped = 0;
    while (kept_ > bytes && dropped < blocks_.size()) {
        Block& oldest = blocks_[dropped];
        const std::uint64_t excess = whole_pages(kept_ - bytes);
        if (excess < oldest.bytes) {
            unmap(static_cast<unsigned char*>(oldest.ptr) + oldest.bytes - excess, excess);
            oldest.bytes -= excess;
            kept_ -= excess;
            break;
        }
        unmap(oldest.ptr, oldest.bytes);
        kept_ -= oldest.bytes;
        ++dropped;
    }
    blocks_.erase(blocks_.begin(), blocks_.begin() + static_cast<std::ptrdiff_t>(dropped));
}

}  // namespace tune::harness
