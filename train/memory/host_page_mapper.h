// This process's pages (the CPU backend's memory): anonymous private
// mappings, zero on first touch, moved with mremap and returned with munmap.
#pragma once

#include "kernels/page_mapper.h"

namespace tune::train {

class HostPageMapper final : public kernels::PageMapper {
public:
    HostPageMapper();

    std::uint64_t page_bytes() const override { return page_; }
    // Below it glibc's heap serves a buffer from pages it keeps anyway.
    std::uint64_t min_buffer_bytes() const override { return 64 * 1024; }
    // Mapped at once; its pages fault in when first touched.
    void* reserve(std::uint64_t bytes) override;
    bool move(void* from, void* to, std::uint64_t bytes) override;
    // Nothing to do: reserve()'s pages are backed on first touch.
    bool back(void*, std::uint64_t) override { return true; }
    void release(void* ptr, std::uint64_t bytes) noexcept override;

private:
    std::uint64_t page_;
};

}  // namespace tune::train
