#include "train/memory/host_page_mapper.h"

#include <sys/mman.h>
#include <unistd.h>

namespace tune::train {

HostPageMapper::HostPageMapper() : page_(static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE))) {}

void* HostPageMapper::reserve(std::uint64_t bytes) {
    void* range = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return range == MAP_FAILED ? nullptr : range;
}

bool HostPageMapper::move(void* from, void* to, std::uint64_t bytes) {
    // Same size, to a fixed address: the page-table entries move, the pages
    // stay resident. A block assembled from moved pieces may span several
    // mappings, which older kernels refuse to move (EFAULT): the caller then
    // leaves those pages to fault in.
    return ::mremap(from, bytes, bytes, MREMAP_MAYMOVE | MREMAP_FIXED, to) != MAP_FAILED;
}

void HostPageMapper::release(void* ptr, std::uint64_t bytes) noexcept {
    if (bytes > 0) ::munmap(ptr, bytes);
}

}  // namespace tune::train
