// Device pages through the driver's virtual memory management.
#include "kernels/cuda/device_pages.cuh"

#include <fmt/format.h>

#include <algorithm>

#include "kernels/cuda/cuda_check.h"
#include "kernels/error.h"

namespace tune::kernels::cuda {

// The driver calls, with cuda.h's signatures.
struct DriverMemoryCalls {
    CUresult (*address_reserve)(CUdeviceptr*, std::size_t, std::size_t, CUdeviceptr, unsigned long long) = nullptr;
    CUresult (*address_free)(CUdeviceptr, std::size_t) = nullptr;
    CUresult (*create)(CUmemGenericAllocationHandle*, std::size_t, const CUmemAllocationProp*,
                       unsigned long long) = nullptr;
    CUresult (*release)(CUmemGenericAllocationHandle) = nullptr;
    CUresult (*map)(CUdeviceptr, std::size_t, std::size_t, CUmemGenericAllocationHandle, unsigned long long) = nullptr;
    CUresult (*unmap)(CUdeviceptr, std::size_t) = nullptr;
    CUresult (*set_access)(CUdeviceptr, std::size_t, const CUmemAccessDesc*, std::size_t) = nullptr;
    CUresult (*granularity)(std::size_t*, const CUmemAllocationProp*, CUmemAllocationGranularity_flags) = nullptr;
    CUmemAllocationProp prop{};  // pinned pages on the backend's device
};

namespace {

// The driver ABI these signatures belong to (unchanged since CUDA 10.2).
constexpr unsigned kDriverAbi = 12000;

template <class Fn>
bool find_entry(const char* symbol, Fn& fn) {
    void* entry = nullptr;
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion(symbol, &entry, kDriverAbi, cudaEnableDefault, &found) != cudaSuccess) {
        cudaGetLastError();
        return false;
    }
    if (found != cudaDriverEntryPointSuccess || entry == nullptr) return false;
    fn = reinterpret_cast<Fn>(entry);
    return true;
}

bool find_entries(DriverMemoryCalls& c) {
    return find_entry("cuMemAddressReserve", c.address_reserve) && find_entry("cuMemAddressFree", c.address_free) &&
           find_entry("cuMemCreate", c.create) && find_entry("cuMemRelease", c.release) &&
           find_entry("cuMemMap", c.map) && find_entry("cuMemUnmap", c.unmap) &&
           find_entry("cuMemSetAccess", c.set_access) && find_entry("cuMemGetAllocationGranularity", c.granularity);
}

void check_driver(CUresult status, const char* call, int line) {
    if (status != CUDA_SUCCESS)
        throw BackendError(
            fmt::format("{} failed: CUresult {} ({}:{})", call, static_cast<int>(status), __FILE__, line));
}

#define TUNE_DRIVER_CHECK(call) check_driver((call), #call, __LINE__)

CUdeviceptr address_of(void* p) { return reinterpret_cast<CUdeviceptr>(p); }

// A buffer freed on the host may still be read by queued kernels: unmap only what the device is done with.
void wait_for_device() noexcept {
    if (cudaDeviceSynchronize() != cudaSuccess) cudaGetLastError();
}

}  // namespace

std::unique_ptr<DevicePages> DevicePages::open(int device) {
    auto calls = std::make_unique<DriverMemoryCalls>();
    if (!find_entries(*calls)) return nullptr;
    calls->prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    calls->prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    calls->prop.location.id = device;
    std::size_t page = 0;
    if (calls->granularity(&page, &calls->prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_SUCCESS || page == 0)
        return nullptr;  // no virtual memory management on this device
    return std::unique_ptr<DevicePages>(new DevicePages(std::move(calls), page));
}

DevicePages::DevicePages(std::unique_ptr<DriverMemoryCalls> calls, std::uint64_t page)
    : calls_(std::move(calls)), page_(page) {}

DevicePages::~DevicePages() {
    wait_for_device();
    while (!pages_.empty()) unmap_page(pages_.begin()->first, true);
    for (const auto& [start, range] : ranges_) calls_->address_free(start, range.bytes);
}

void* DevicePages::reserve(std::uint64_t bytes) {
    CUdeviceptr start = 0;
    if (calls_->address_reserve(&start, bytes, page_, 0, 0) != CUDA_SUCCESS) return nullptr;
    ranges_.emplace(start, Range{bytes, 0});
    return reinterpret_cast<void*>(start);
}

bool DevicePages::back(void* at, std::uint64_t bytes) {
    const CUdeviceptr start = address_of(at);
    std::uint64_t done = 0;
    for (; done < bytes; done += page_) {
        CUmemGenericAllocationHandle page = 0;
        const CUresult made = calls_->create(&page, page_, &calls_->prop, 0);
        if (made == CUDA_ERROR_OUT_OF_MEMORY) break;
        TUNE_DRIVER_CHECK(made);
        map_page(start + done, page);
    }
    if (done < bytes) {  // out of memory: back nothing, as the caller expects
        for (std::uint64_t p = 0; p < done; p += page_) unmap_page(start + p, true);
        return false;
    }
    allow_access(start, bytes);
    return true;
}

bool DevicePages::move(void* from, void* to, std::uint64_t bytes) {
    wait_for_device();
    for (std::uint64_t p = 0; p < bytes; p += page_) {
        const auto page = pages_.find(address_of(from) + p);
        if (page == pages_.end())
            throw BackendError(fmt::format("device pages: no page at {} to move (a kept block not backed)", from));
        const CUmemGenericAllocationHandle handle = page->second;
        unmap_page(page->first, false);
        map_page(address_of(to) + p, handle);
    }
    free_range_if_empty(range_of(address_of(from)));
    allow_access(address_of(to), bytes);
    return true;
}

void DevicePages::release(void* ptr, std::uint64_t bytes) noexcept {
    wait_for_device();
    for (std::uint64_t p = 0; p < bytes; p += page_) unmap_page(address_of(ptr) + p, true);
    free_range_if_empty(range_of(address_of(ptr)));
}

std::map<CUdeviceptr, DevicePages::Range>::iterator DevicePages::range_of(CUdeviceptr address) {
    auto after = ranges_.upper_bound(address);
    if (after == ranges_.begin()) return ranges_.end();
    const auto range = std::prev(after);
    return address < range->first + range->second.bytes ? range : ranges_.end();
}

void DevicePages::map_page(CUdeviceptr at, CUmemGenericAllocationHandle page) {
    const CUresult mapped = calls_->map(at, page_, 0, page, 0);
    if (mapped != CUDA_SUCCESS) calls_->release(page);
    TUNE_DRIVER_CHECK(mapped);
    pages_.emplace(at, page);
    if (const auto range = range_of(at); range != ranges_.end()) ++range->second.backed_pages;
    ++backed_pages_;
    backed_high_pages_ = std::max(backed_high_pages_, backed_pages_);
}

void DevicePages::allow_access(CUdeviceptr at, std::uint64_t bytes) {
    if (bytes == 0) return;
    CUmemAccessDesc access{};
    access.location = calls_->prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    TUNE_DRIVER_CHECK(calls_->set_access(at, bytes, &access, 1));
}

void DevicePages::unmap_page(CUdeviceptr at, bool release) noexcept {
    const auto page = pages_.find(at);
    if (page == pages_.end()) return;
    calls_->unmap(at, page_);
    if (release) calls_->release(page->second);
    pages_.erase(page);
    if (const auto range = range_of(at); range != ranges_.end()) --range->second.backed_pages;
    --backed_pages_;
}

void DevicePages::free_range_if_empty(std::map<CUdeviceptr, Range>::iterator range) noexcept {
    if (range == ranges_.end() || range->second.backed_pages > 0) return;
    calls_->address_free(range->first, range->second.bytes);
    ranges_.erase(range);
}

}  // namespace tune::kernels::cuda
