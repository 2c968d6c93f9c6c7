// The emulated driver's virtual memory management, and the entry points
// cudaGetDriverEntryPointByVersion hands out for it.
#include "virtual_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include "device.h"

namespace tune_emu {

namespace {

std::uint64_t page_bytes_from_env() {
    const char* v = std::getenv("TUNE_EMU_PAGE_BYTES");
    const std::uint64_t host_page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
    std::uint64_t bytes = v != nullptr && *v != '\0' ? std::strtoull(v, nullptr, 10) : 64 * 1024;
    if (bytes == 0 || bytes % host_page != 0)
        throw std::invalid_argument("TUNE_EMU_PAGE_BYTES must be a positive multiple of " + std::to_string(host_page));
    return bytes;
}

bool whole(std::uint64_t value, std::uint64_t page) { return value != 0 && value % page == 0; }

void* as_pointer(std::uintptr_t address) { return reinterpret_cast<void*>(address); }

}  // namespace

VirtualMemory::VirtualMemory() : page_(page_bytes_from_env()) {
    file_ = ::memfd_create("tune_emu_device_memory", MFD_CLOEXEC);
    if (file_ < 0) throw std::runtime_error(std::string("tune_emu: memfd_create: ") + std::strerror(errno));
}

VirtualMemory::~VirtualMemory() {
    for (auto& [start, range] : ranges_) ::munmap(as_pointer(start), range.bytes);
    for (auto& [page, alive] : pages_) delete page;
    ::close(file_);
}

CUresult VirtualMemory::fail(CUresult status, const char* what) const {
    last_failure_ = what;  // the driver keeps no runtime error: a pending one stays as it was
    return status;
}

CUresult VirtualMemory::query_granularity(std::size_t* granularity, const CUmemAllocationProp* prop) {
    if (granularity == nullptr || prop == nullptr || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED ||
        prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE || prop->location.id != 0)
        return fail(CUDA_ERROR_INVALID_VALUE, "cuMemGetAllocationGranularity: pinned device-0 pages only");
    *granularity = page_;
    return CUDA_SUCCESS;
}

CUresult VirtualMemory::reserve(CUdeviceptr* ptr, std::size_t size, std::size_t alignment) {
    if (ptr == nullptr || !whole(size, page_) || (alignment != 0 && alignment % page_ != 0))
        return fail(CUDA_ERROR_INVALID_VALUE, "cuMemAddressReserve: size and alignment in whole pages");
    const std::uint64_t align = alignment == 0 ? page_ : alignment;
    // Over-reserve, then cut the head and tail off so the start is aligned as a driver's is.
    void* raw = ::mmap(nullptr, size + align, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (raw == MAP_FAILED) return fail(CUDA_ERROR_OUT_OF_MEMORY, "cuMemAddressReserve: no address space");
    const auto begin = reinterpret_cast<std::uintptr_t>(raw);
    const std::uintptr_t start = (begin + align - 1) / align * align;
    if (start > begin) ::munmap(raw, start - begin);
    if (begin + size + align > start + size) ::munmap(as_pointer(start + size), begin + size + align - start - size);
    std::lock_guard lock(mutex_);
    ranges_[start] = Range{size, {}};
    *ptr = start;
    return CUDA_SUCCESS;
}

CUresult VirtualMemory::free_range(CUdeviceptr ptr, std::size_t size) {
    std::lock_guard lock(mutex_);
    const auto range = ranges_.find(ptr);
    if (range == ranges_.end() || range->second.bytes != size)
        return fail(CUDA_ERROR_INVALID_VALUE, "cuMemAddressFree: not a whole reserved range");
    if (!range->second.mappings.empty())
        return fail(CUDA_ERROR_INVALID_VALUE, "cuMemAddressFree: the range still has pages mapped");
    ::munmap(as_pointer(ptr), size);
    ranges_.erase(range);
    return CUDA_SUCCESS;
}

CUresult VirtualMemory::create(CUmemGenericAllocationHandle* handle, std::size_t size,
                               const CUmemAllocationProp* prop) {
    std::size_t unit = 0;
    if (handle == nullptr || query_granularity(&unit, prop) != CUDA_SUCCESS || !whole(size, page_))
        return fail(CUDA_ERROR_INVALID_VALUE, "cuMemCreate: pinned device-0 pages, whole granules");
    std::lock_guard lock(mutex_);
    if (!device().charge_pages(size))
        return fail(CUDA_ERROR_OUT_OF_MEMORY, "cuMemCreate: out of emulated device memory");
    if (::ftruncate(file_, static_cast<off_t>(file_end_ + size)) != 0) {
        device().refund_pages(size);
        return fail(CUDA_ERROR_OUT_OF_MEMORY, "cuMemCreate: the memory file cannot grow");
    }
    auto* page = new Page{file_end_, size};
    file_end_ += size;
    pages_[page] = true;
    *handle = reinterpret_cast<CUmemGenericAllocationHandle>(page);
    return CUDA_SUCCESS;
}

void VirtualMemory::drop_if_unused(Page* page) {
    if (!page->released || page->mappings > 0) return;
    // Give the slice's memory back (the file stays as long; its hole reads zero).
    ::fallocate(file_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(page->offset),
                static_cast<off_t>(page->bytes));
    device().refund_pages(page->bytes);
    pages_.erase(page);
    delete page;
}

CUresult VirtualMemory::release(CUmemGenericAllocationHandle handle) {
    std::lock_guard lock(mutex_);
    auto* page = reinterpret_cast<Page*>(handle);
    if (pages_.count(page) == 0 || page->released)
        return fail(CUDA_ERROR_INVALID_VALUE, "cuMemRelease: not a live page handle");
    page->released = true;
    drop_if_unused(page);
    return CUDA_SUCCESS;
}

VirtualMemory::Range* VirtualMemory::range_holding(std::uintptr_t address, std::uint64_t bytes) {
    auto after = ranges_.upper_bound(address);
    if (after == ranges_.begin()) return nullptr;
    auto& [start, range] = *std::prev(after);
    return address + bytes <= start + range.bytes ? &range : nullptr;
}

const VirtualMemory::Range* VirtualMemory::range_holding(std::uintptr_t address, std::uint64_t bytes) const {
    return const_cast<VirtualMemory*>(this)->range_holding(address, bytes);
}

CUresult VirtualMemory::map(CUdeviceptr ptr, std::size_t size, std::size_t offset,
                            CUmemGenericAllocationHandle handle) {
    std::lock_guard lock(mutex_);
    auto* page = reinterpret_cast<Page*>(handle);
    if (pages_.count(page) == 0 || page->released || offset != 0 || size != page->bytes || ptr % page_ != 0)
        return fail(CUDA_ERROR_INVALID_VALUE, "cuMemMap: a whole live page at a page-aligned address");
    Range* range = range_holding(ptr, size);
    if (range == nullptr) return fail(CUDA_ERROR_INVALID_VALUE, "cuMemMap: outside every reserved range");
    const auto next = range->mappings.lower_bound(ptr);
    const bool overlaps_next = next != range->mappings.end() && next->first < ptr + size;
    const bool overlaps_prev =
        next != range->mappings.begin() && std::prev(next)->first + std::prev(next)->second.bytes > ptr;
    if (overlaps_next || overlaps_prev)
        return fail(CUDA_ERROR_INVALID_VALUE, "cuMemMap: the address is mapped already");
    if (::mmap(as_pointer(ptr), size, PROT_NONE, MAP_SHARED | MAP_FIXED, file_, static_cast<off_t>(page->offset)) ==
        MAP_FAILED)
        return fail(CUDA_ERROR_OUT_OF_MEMORY, "cuMemMap: mmap failed");
    range->mappings[ptr] = Mapping{size, page};
    ++page->mappings;
    return CUDA_SUCCESS;
}

CUresult VirtualMemory::unmap(CUdeviceptr ptr, std::size_t size) {
    std::lock_guard lock(mutex_);
    Range* range = range_holding(ptr, size);
    if (range == nullptr) return fail(CUDA_ERROR_INVALID_VALUE, "cuMemUnmap: outside every reserved range");
    // Whole mappings only, back to back from ptr to ptr + size.
    std::uintptr_t at = ptr;
    auto m = range->mappings.find(ptr);
    while (at < ptr + size) {
        if (m == range->mappings.end() || m->first != at)
            return fail(CUDA_ERROR_INVALID_VALUE, "cuMemUnmap: not whole mappings");
        at += m->second.bytes;
        ++m;
    }
    if (at != ptr + size) return fail(CUDA_ERROR_INVALID_VALUE, "cuMemUnmap: not whole mappings");
    ::mmap(as_pointer(ptr), size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
    for (m = range->mappings.find(ptr); m != range->mappings.end() && m->first < ptr + size;) {
        Page* page = m->second.page;
        --page->mappings;
        m = range->mappings.erase(m);
        drop_if_unused(page);
    }
    return CUDA_SUCCESS;
}

CUresult VirtualMemory::set_access(CUdeviceptr ptr, std::size_t size, const CUmemAccessDesc* desc, std::size_t count) {
    if (desc == nullptr || count != 1 || desc->location.type != CU_MEM_LOCATION_TYPE_DEVICE || desc->location.id != 0 ||
        desc->flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
        return fail(CUDA_ERROR_INVALID_VALUE, "cuMemSetAccess: read-write on device 0 only");
    std::lock_guard lock(mutex_);
    Range* range = range_holding(ptr, size);
    if (range == nullptr || size == 0)
        return fail(CUDA_ERROR_INVALID_VALUE, "cuMemSetAccess: outside every reserved range");
    std::uintptr_t at = ptr;
    for (auto m = range->mappings.find(ptr); at < ptr + size; ++m) {
        if (m == range->mappings.end() || m->first != at)
            return fail(CUDA_ERROR_INVALID_VALUE, "cuMemSetAccess: a page in the range is not mapped");
        at += m->second.bytes;
    }
    ::mprotect(as_pointer(ptr), size, PROT_READ | PROT_WRITE);
    for (auto m = range->mappings.find(ptr); m != range->mappings.end() && m->first < ptr + size; ++m)
        m->second.accessible = true;
    return CUDA_SUCCESS;
}

bool VirtualMemory::accessible(std::uintptr_t address, std::uint64_t bytes) const {
    std::lock_guard lock(mutex_);
    const Range* range = range_holding(address, bytes);
    if (range == nullptr) return false;
    // The mapping holding `address`, then back to back to the end.
    auto m = range->mappings.upper_bound(address);
    if (m == range->mappings.begin()) return false;
    --m;
    for (std::uintptr_t at = m->first; at < address + bytes; ++m) {
        if (m == range->mappings.end() || m->first != at || !m->second.accessible) return false;
        at += m->second.bytes;
    }
    return true;
}

VirtualMemory& virtual_memory() {
    static VirtualMemory vm;
    return vm;
}

}  // namespace tune_emu

// ---- the driver entry points, with cuda.h's signatures ----

namespace {

using tune_emu::virtual_memory;

CUresult emu_cuMemAddressReserve(CUdeviceptr* ptr, std::size_t size, std::size_t alignment, CUdeviceptr,
                                 unsigned long long) {
    return virtual_memory().reserve(ptr, size, alignment);
}
CUresult emu_cuMemAddressFree(CUdeviceptr ptr, std::size_t size) { return virtual_memory().free_range(ptr, size); }
CUresult emu_cuMemCreate(CUmemGenericAllocationHandle* handle, std::size_t size, const CUmemAllocationProp* prop,
                         unsigned long long) {
    return virtual_memory().create(handle, size, prop);
}
CUresult emu_cuMemRelease(CUmemGenericAllocationHandle handle) { return virtual_memory().release(handle); }
CUresult emu_cuMemMap(CUdeviceptr ptr, std::size_t size, std::size_t offset, CUmemGenericAllocationHandle handle,
                      unsigned long long) {
    return virtual_memory().map(ptr, size, offset, handle);
}
CUresult emu_cuMemUnmap(CUdeviceptr ptr, std::size_t size) { return virtual_memory().unmap(ptr, size); }
CUresult emu_cuMemSetAccess(CUdeviceptr ptr, std::size_t size, const CUmemAccessDesc* desc, std::size_t count) {
    return virtual_memory().set_access(ptr, size, desc, count);
}
CUresult emu_cuMemGetAllocationGranularity(std::size_t* granularity, const CUmemAllocationProp* prop,
                                           CUmemAllocationGranularity_flags) {
    return virtual_memory().query_granularity(granularity, prop);
}

struct Entry {
    const char* name;
    void* function;
};

}  // namespace

cudaError_t cudaGetDriverEntryPointByVersion(const char* symbol, void** function, unsigned int, unsigned long long,
                                             cudaDriverEntryPointQueryResult* status) {
    static const Entry entries[] = {
        {"cuMemAddressReserve", reinterpret_cast<void*>(&emu_cuMemAddressReserve)},
        {"cuMemAddressFree", reinterpret_cast<void*>(&emu_cuMemAddressFree)},
        {"cuMemCreate", reinterpret_cast<void*>(&emu_cuMemCreate)},
        {"cuMemRelease", reinterpret_cast<void*>(&emu_cuMemRelease)},
        {"cuMemMap", reinterpret_cast<void*>(&emu_cuMemMap)},
        {"cuMemUnmap", reinterpret_cast<void*>(&emu_cuMemUnmap)},
        {"cuMemSetAccess", reinterpret_cast<void*>(&emu_cuMemSetAccess)},
        {"cuMemGetAllocationGranularity", reinterpret_cast<void*>(&emu_cuMemGetAllocationGranularity)},
    };
    if (symbol == nullptr || function == nullptr) return cudaErrorInvalidValue;
    *function = nullptr;
    for (const Entry& e : entries)
        if (std::strcmp(e.name, symbol) == 0) *function = e.function;
    if (status != nullptr)
        *status = *function != nullptr ? cudaDriverEntryPointSuccess : cudaDriverEntryPointSymbolNotFound;
    return cudaSuccess;
}
