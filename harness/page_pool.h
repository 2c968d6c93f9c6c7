// Page-mapped host buffers, and the freed ones kept for reuse, never more
// than the tagged peak lets in: the CPU backend's caching allocator.
//
// A freed buffer handed back to the kernel (munmap) costs a page fault per
// 4 KiB when its size is asked for again, and a training step asks for the
// same sizes every step: on the demo's one-rank trial 880 faults a step, at
// about 4 us each on a virtual machine, were a tenth of the step and no
// estimate priced them. Keeping every freed buffer (PyTorch's caching
// allocator) would leave the resident set above the tagged bytes by the
// pool's slack, the number issue 18 asked to keep small. So the pool keeps
// freed pages only while the buffers in use plus the kept pages stay within
// the tagged peak so far: the resident set still never exceeds baseline +
// tagged peak. A request takes the kept block that fits best, split to its
// size; when none is large enough it gets a fresh range into which kept
// blocks' pages are moved (mremap: their page-table entries move, the pages
// stay resident), so once a step has run the next one faults in only what the
// peak made the pool give back. Growing the largest kept block instead, as
// the pool once did, faulted in the rest each time while other kept blocks
// were handed back: a later step of the tiny model (test_page_pool) mapped
// 344 KB anew, 7% of its peak (2026-11-26).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace tune::harness {

class PagePool {
public:
    PagePool() = default;
    PagePool(const PagePool&) = delete;
    PagePool& operator=(const PagePool&) = delete;
    ~PagePool();

    // A buffer of `bytes` (whole pages): the kept block that fits best,
    // split when it is larger (the tail stays kept); else a fresh mapping
    // filled with kept pages, largest blocks first, so only what they do not
    // cover faults (zero pages). Then kept pages go back, oldest first, until
    // at most `keep_at_most` bytes stay kept. Contents are whatever the last
    // user left. Throws OutOfMemoryError (live: for its message) when mmap fails.
    void* take(std::uint64_t bytes, std::uint64_t keep_at_most, std::uint64_t live);
    // Keeps a buffer take() gave, for the next request.
    void give(void* ptr, std::uint64_t bytes) noexcept;
    // Hands back kept pages, oldest first (the last one maybe in part),
    // until at most `bytes` stay kept.
    void trim(std::uint64_t bytes) noexcept;

    std::uint64_t kept() const { return kept_; }
    // Bytes asked of the kernel so far (fresh mappings and growth): what faults in.
    std::uint64_t mapped() const { return mapped_; }

private:
    struct Block {
        void* ptr;
        std::uint64_t bytes;
    };
    std::optional<Block> take_fitting(std::uint64_t need);
    // Moves kept pages into range's first `need` bytes, largest blocks first; the bytes moved.
    std::uint64_t move_kept_into(unsigned char* range, std::uint64_t need);

    std::vector<Block> blocks_;  // kept, in the order they were given
    std::uint64_t kept_ = 0;
    std::uint64_t mapped_ = 0;
};

}  // namespace tune::harness
