// The driver's virtual memory management on the emulated device (cuMem*):
// reserved address ranges are PROT_NONE mappings; a page (cuMemCreate) is a
// slice of one memory file, counted against the device's memory; cuMemMap
// maps the slice over part of a reservation (MAP_FIXED, still PROT_NONE) and
// cuMemSetAccess makes it readable and writable, so a kernel touching an
// unmapped or inaccessible page faults here as on a GPU. The rules a driver
// enforces and a caller could break are checked: whole pages, a map only into
// an unmapped part of one reservation, access only over mapped pages, an
// unmap of whole mappings, a range freed only whole and empty, a page
// released once (its memory goes when its last mapping does).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "cuda.h"

namespace tune_emu {

class VirtualMemory {
public:
    VirtualMemory();
    ~VirtualMemory();
    VirtualMemory(const VirtualMemory&) = delete;
    VirtualMemory& operator=(const VirtualMemory&) = delete;

    std::uint64_t granularity() const { return page_; }

    CUresult reserve(CUdeviceptr* ptr, std::size_t size, std::size_t alignment);
    CUresult free_range(CUdeviceptr ptr, std::size_t size);
    CUresult create(CUmemGenericAllocationHandle* handle, std::size_t size, const CUmemAllocationProp* prop);
    CUresult release(CUmemGenericAllocationHandle handle);
    CUresult map(CUdeviceptr ptr, std::size_t size, std::size_t offset, CUmemGenericAllocationHandle handle);
    CUresult unmap(CUdeviceptr ptr, std::size_t size);
    CUresult set_access(CUdeviceptr ptr, std::size_t size, const CUmemAccessDesc* desc, std::size_t count);
    CUresult query_granularity(std::size_t* granularity, const CUmemAllocationProp* prop);

    // Which rule the last refused call broke (for a debugger; a call's CUresult is its answer).
    const std::string& last_failure() const { return last_failure_; }

    // Whether [address, address + bytes) lies in one reservation, mapped and accessible throughout.
    bool accessible(std::uintptr_t address, std::uint64_t bytes) const;

private:
    struct Page {
        std::uint64_t offset;  // in the memory file
        std::uint64_t bytes;
        int mappings = 0;
        bool released = false;
    };
    struct Mapping {
        std::uint64_t bytes;
        Page* page;
        bool accessible = false;
    };
    struct Range {
        std::uint64_t bytes;
        std::map<std::uintptr_t, Mapping> mappings;  // by address
    };
    Range* range_holding(std::uintptr_t address, std::uint64_t bytes);
    const Range* range_holding(std::uintptr_t address, std::uint64_t bytes) const;
    void drop_if_unused(Page* page);
    CUresult fail(CUresult status, const char* what) const;

    std::uint64_t page_;
    int file_ = -1;               // the device's memory: pages are slices of it
    std::uint64_t file_end_ = 0;  // slices are never reused; released ones are punched out
    mutable std::mutex mutex_;
    std::map<std::uintptr_t, Range> ranges_;  // by start
    std::map<Page*, bool> pages_;             // alive (created, not yet gone)
    mutable std::string last_failure_;
};

VirtualMemory& virtual_memory();

}  // namespace tune_emu
