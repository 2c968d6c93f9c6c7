// The CUDA backend's page mapper (kernels/cuda/device_pages) on a device:
// pages backed, moved with their contents, released; a back() the device
// cannot hold backs nothing. Shared by the GPU tests and the emulated device's.
#pragma once

#include <catch2/catch.hpp>

#include <cuda_runtime.h>

#include <cstdint>
#include <numeric>
#include <vector>

#include "kernels/cuda/cuda_backend.h"

namespace tune::test {

inline void check_device_pages() {
    kernels::CudaBackendOptions options;
    options.device_pages = true;
    auto cuda = kernels::make_cuda_backend(options);
    kernels::PageMapper* pages = cuda->page_mapper();
    REQUIRE(pages != nullptr);
    const std::uint64_t page = pages->page_bytes();
    CHECK(page >= (64u << 10));
    CHECK(pages->min_buffer_bytes() == page);

    auto* a = static_cast<unsigned char*>(pages->reserve(3 * page));
    REQUIRE(a != nullptr);
    REQUIRE(pages->back(a, 3 * page));
    std::vector<std::uint32_t> pattern(3 * page / 4);
    std::iota(pattern.begin(), pattern.end(), 7u);
    cuda->copy_to_device(a, pattern.data(), 3 * page);

    // Into a larger range: the 3 pages move (kept contents), the fourth is fresh.
    auto* b = static_cast<unsigned char*>(pages->reserve(4 * page));
    REQUIRE(b != nullptr);
    REQUIRE(pages->move(a, b, 3 * page));
    REQUIRE(pages->back(b + 3 * page, page));
    cuda->fill_zero(b + 3 * page, page);
    std::vector<std::uint32_t> moved(pattern.size());
    cuda->copy_to_host(moved.data(), b, 3 * page);
    CHECK(moved == pattern);
    auto stats = kernels::cuda_memory_stats(*cuda);
    REQUIRE(stats.has_value());
    CHECK(stats->pages_bytes == 4 * page);
    CHECK(stats->pages_high_bytes == 4 * page);

    // One page more than the device has free: nothing is backed, and the range goes back.
    std::size_t free_bytes = 0, total_bytes = 0;
    REQUIRE(cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess);
    const std::uint64_t too_much = (free_bytes / page + 1) * page;
    void* huge = pages->reserve(too_much);
    REQUIRE(huge != nullptr);
    CHECK_FALSE(pages->back(huge, too_much));
    pages->release(huge, too_much);
    CHECK(kernels::cuda_memory_stats(*cuda)->pages_bytes == 4 * page);

    pages->release(b, 4 * page);
    CHECK(kernels::cuda_memory_stats(*cuda)->pages_bytes == 0);
}

}  // namespace tune::test
