// The device's memory as pages of the driver's allocation granularity (2 MiB
// on an H100), each a physical allocation (cuMemCreate) mapped into reserved
// virtual ranges (cuMemAddressReserve, cuMemMap): the page mapper through
// which train/memory/page_pool keeps the trainer's large buffers within the tagged
// peak, where the stream-ordered pool holds its slack beyond it. PyTorch's
// expandable segments map pages the same way. Opt-in (TUNE_CUDA_PAGES=1):
// staying within the peak moves pages every step, and each unmap waits for
// the device (measured on an H100: the real-memory file in docs/results/).
//
// The driver's entry points come through cudaGetDriverEntryPointByVersion,
// so `tune` links no libcuda and still starts on a machine without a driver.
// Pages are unmapped only after the device is idle (cudaDeviceSynchronize):
// a buffer freed on the host may still be read by queued kernels. The pool
// moves or hands back pages only when no kept block fits a request.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <memory>

#include "kernels/page_mapper.h"

namespace tune::kernels::cuda {

struct DriverMemoryCalls;

class DevicePages final : public PageMapper {
public:
    // nullptr when the driver or device offers no virtual memory management.
    static std::unique_ptr<DevicePages> open(int device);
    ~DevicePages() override;
    DevicePages(const DevicePages&) = delete;
    DevicePages& operator=(const DevicePages&) = delete;

    std::uint64_t page_bytes() const override { return page_; }
    // Smaller buffers would waste most of a page: they stay in the pool.
    std::uint64_t min_buffer_bytes() const override { return page_; }
    void* reserve(std::uint64_t bytes) override;
    bool move(void* from, void* to, std::uint64_t bytes) override;
    bool back(void* at, std::uint64_t bytes) override;
    void release(void* ptr, std::uint64_t bytes) noexcept override;

    // Bytes of physical pages held now, and the most held since reset_high().
    std::uint64_t backed_bytes() const { return backed_pages_ * page_; }
    std::uint64_t backed_high_bytes() const { return backed_high_pages_ * page_; }
    void reset_high() { backed_high_pages_ = backed_pages_; }

private:
    DevicePages(std::unique_ptr<DriverMemoryCalls> calls, std::uint64_t page);
    struct Range {
        std::uint64_t bytes;
        std::uint64_t backed_pages;
    };
    // The reserved range holding `address`.
    std::map<CUdeviceptr, Range>::iterator range_of(CUdeviceptr address);
    void map_page(CUdeviceptr at, CUmemGenericAllocationHandle page);
    void allow_access(CUdeviceptr at, std::uint64_t bytes);
    // Unmaps (and releases) the page at `at`, if one is there.
    void unmap_page(CUdeviceptr at, bool release) noexcept;
    void free_range_if_empty(std::map<CUdeviceptr, Range>::iterator range) noexcept;

    std::unique_ptr<DriverMemoryCalls> calls_;
    std::uint64_t page_;
    std::map<CUdeviceptr, Range> ranges_;                        // by start
    std::map<CUdeviceptr, CUmemGenericAllocationHandle> pages_;  // mapped, by address
    std::uint64_t backed_pages_ = 0;
    std::uint64_t backed_high_pages_ = 0;
};

}  // namespace tune::kernels::cuda
