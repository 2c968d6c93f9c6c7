// Page-mapped buffers, and the freed ones kept for reuse, never more than the
// tagged peak lets in: the caching allocator of the CPU backend, and of a
// GPU's large buffers (kernels/page_mapper.h says whose pages are whose).
//
// A freed buffer handed back (munmap) costs a page fault per 4 KiB when its
// size is asked for again, and a training step asks for the same sizes every
// step, a cost no estimate prices. Keeping every freed buffer (PyTorch's
// caching allocator, CUDA's stream-ordered pool) instead leaves the memory
// held above the tagged bytes by the pool's slack, which grows with the
// activations. So the pool keeps freed pages only while the buffers in use
// plus the kept pages stay within the tagged peak so far: the memory held
// never exceeds baseline + tagged peak (plus each buffer's rounding to whole
// pages). A request takes the kept block that fits best, split to its size;
// when none is large enough it gets a fresh range into which kept blocks'
// pages are moved (the pages stay resident, where growing one block would
// fault in the rest), so once a step has run the next one maps nothing new.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "kernels/page_mapper.h"

namespace tune::train {

class PagePool {
public:
    // Pages come from `mapper`, which must outlive the pool.
    explicit PagePool(kernels::PageMapper& mapper) : mapper_(mapper) {}
    PagePool(const PagePool&) = delete;
    PagePool& operator=(const PagePool&) = delete;
    ~PagePool();

    // A buffer of `bytes` (rounded up to whole pages): the kept block that
    // fits best, split when it is larger (the tail stays kept); else a fresh
    // range filled with kept pages, largest blocks first, and fresh pages for
    // the rest. Then kept pages go back, oldest first, until at most
    // `keep_at_most` bytes stay kept. Contents are whatever the last user left.
    // Throws OutOfMemoryError (live: for its message) when the mapper has no
    // range or pages left, after handing back every kept page.
    void* take(std::uint64_t bytes, std::uint64_t keep_at_most, std::uint64_t live);
    // Keeps a buffer take() gave, for the next request.
    void give(void* ptr, std::uint64_t bytes) noexcept;
    // Hands back kept pages, oldest first (the last one maybe in part),
    // until at most `bytes` stay kept.
    void trim(std::uint64_t bytes) noexcept;

    std::uint64_t kept() const { return kept_; }
    // Bytes of kept pages moved into fresh ranges so far: a training step moves some every step,
    // which costs the CPU page-table updates and a GPU a device synchronisation per page
    // (kernels/cuda/device_pages.cuh).
    std::uint64_t moved() const { return moved_; }
    // Whole pages of the buffers taken and not given back.
    std::uint64_t in_use() const { return in_use_; }
    // The most pages held at once, in use plus kept: what the mapper was asked to hold.
    std::uint64_t held_high() const { return held_high_; }
    // Bytes of fresh pages so far (on the CPU: what faults in).
    std::uint64_t mapped() const { return mapped_; }

private:
    struct Block {
        void* ptr;
        std::uint64_t bytes;
    };
    std::optional<Block> take_fitting(std::uint64_t need);
    void keep(void* ptr, std::uint64_t bytes) noexcept;
    // Moves kept pages into range's first `need` bytes, largest blocks first; the bytes moved.
    std::uint64_t move_kept_into(unsigned char* range, std::uint64_t need);

    std::uint64_t whole_pages(std::uint64_t bytes) const;

    kernels::PageMapper& mapper_;
    std::vector<Block> blocks_;  // kept, in the order they were given
    std::uint64_t kept_ = 0;
    std::uint64_t mapped_ = 0;
    std::uint64_t moved_ = 0;
    std::uint64_t in_use_ = 0;
    std::uint64_t held_high_ = 0;
};

}  // namespace tune::train
