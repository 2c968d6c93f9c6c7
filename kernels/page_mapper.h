// Whole pages of a backend's memory, moved between address ranges without
// copying: what train/memory/page_pool needs to keep freed buffers resident and
// hand their pages to a larger request, so the memory a process holds
// follows the tagged peak instead of an allocator's slack. The CPU's pages
// are the kernel's (mmap, mremap); a GPU's are the driver's physical
// allocations mapped into reserved virtual ranges (cuMemCreate, cuMemMap).
#pragma once

#include <cstdint>

namespace tune::kernels {

class PageMapper {
public:
    virtual ~PageMapper() = default;

    // Every range is a whole number of these.
    virtual std::uint64_t page_bytes() const = 0;
    // Buffers smaller than this stay with the backend's allocator: rounding
    // them up to a page would cost more than the slack it saves.
    virtual std::uint64_t min_buffer_bytes() const = 0;

    // A fresh address range of `bytes` (whole pages) for move() and back();
    // nullptr when no range is left.
    virtual void* reserve(std::uint64_t bytes) = 0;
    // Moves the pages under [from, from + bytes) to [to, to + bytes), part of
    // a reserve()d range not backed yet: the pages stay resident and keep
    // their contents. false: nothing moved.
    virtual bool move(void* from, void* to, std::uint64_t bytes) = 0;
    // Backs [at, at + bytes), part of a reserve()d range not backed yet, with
    // fresh pages; false, with nothing backed, when the memory is exhausted.
    virtual bool back(void* at, std::uint64_t bytes) = 0;
    // Gives the pages under [ptr, ptr + bytes) back, and the addresses with them.
    virtual void release(void* ptr, std::uint64_t bytes) noexcept = 0;
};

}  // namespace tune::kernels
