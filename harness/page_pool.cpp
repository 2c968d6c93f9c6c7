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
    if (std::optional<Block> kept = take_kept(need)) {
        if (kept->bytes >= need) {  // no fault; a larger block's tail stays kept
            if (kept->bytes > need) give(static_cast<unsigned char*>(kept->ptr) + need, kept->bytes - need);
            return kept->ptr;
        }
        // Smaller: grown in place (or moved), only the new pages fault.
        trim(keep_at_most);
        void* grown = ::mremap(kept->ptr, kept->bytes, need, MREMAP_MAYMOVE);
        if (grown != MAP_FAILED) {
            mapped_ += need - kept->bytes;
            return grown;
        }
        unmap(kept->ptr, kept->bytes);
    }
    trim(keep_at_most);
    // Anonymous private pages: zero on first touch, returned by munmap.
    void* p = ::mmap(nullptr, need, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw OutOfMemoryError(bytes, live, "host allocation failed (mmap)");
    mapped_ += need;
    return p;
}

std::optional<PagePool::Block> PagePool::take_kept(std::uint64_t need) {
    // The best fit: the smallest block of at least `need` (the newest of
    // equals), else the largest below it.
    auto best = blocks_.end();
    for (auto b = blocks_.begin(); b != blocks_.end(); ++b)
        if (b->bytes >= need && (best == blocks_.end() || b->bytes <= best->bytes)) best = b;
    if (best == blocks_.end())
        for (auto b = blocks_.begin(); b != blocks_.end(); ++b)
            if (best == blocks_.end() || b->bytes >= best->bytes) best = b;
    if (best == blocks_.end()) return std::nullopt;
    const Block block = *best;
    blocks_.erase(best);
    kept_ -= block.bytes;
    return block;
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
