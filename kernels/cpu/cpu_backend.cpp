// CpuBackend construction and memory: host buffers counted against an
// optional limit, copies as memcpy.
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_cache.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "kernels/error.h"

namespace tune::kernels {

namespace {

constexpr std::uint64_t kAlignment = 256;

std::uint64_t round_up(std::uint64_t bytes) { return (bytes + kAlignment - 1) / kAlignment * kAlignment; }

}  // namespace

CpuBackend::CpuBackend(CpuBackendOptions options)
    : threads_(options.threads > 0 ? options.threads : omp_get_max_threads()),
      memory_limit_(options.memory_limit),
      private_cache_bytes_(cpu::level2_cache_bytes()) {
    // OpenBLAS stays single-threaded: the backend splits GEMMs over OpenMP
    // threads itself, so only one pool of threads ever runs (OpenBLAS's own
    // threads would spin beside OpenMP's between calls). This is process-wide.
    openblas_set_num_threads(1);
}

void* CpuBackend::allocate(std::uint64_t bytes) {
    if (bytes == 0) return nullptr;
    const std::uint64_t live = live_.load();
    if (memory_limit_ > 0 && live + bytes > memory_limit_)
        throw OutOfMemoryError(bytes, live, "cpu backend limit " + std::to_string(memory_limit_));
    void* ptr = std::aligned_alloc(kAlignment, round_up(bytes));
    if (ptr == nullptr) throw OutOfMemoryError(bytes, live, "host allocation failed");
    live_ += bytes;
    return ptr;
}

void CpuBackend::deallocate(void* ptr, std::uint64_t bytes) noexcept {
    if (ptr == nullptr) return;
    std::free(ptr);
    live_ -= bytes;
}

void CpuBackend::copy_to_device(void* dst, const void* host_src, std::uint64_t bytes) {
    if (bytes > 0) std::memcpy(dst, host_src, bytes);
}

void CpuBackend::copy_to_host(void* host_dst, const void* src, std::uint64_t bytes) {
    if (bytes > 0) std::memcpy(host_dst, src, bytes);
}

void CpuBackend::copy(void* dst, const void* src, std::uint64_t bytes) {
    if (bytes > 0) std::memmove(dst, src, bytes);
}

void CpuBackend::fill_zero(void* dst, std::uint64_t bytes) {
    auto* p = static_cast<unsigned char*>(dst);
    const auto n = static_cast<std::int64_t>(bytes);
    constexpr std::int64_t kChunk = 1 << 20;
#pragma omp parallel for num_threads(threads_) schedule(static)
    for (std::int64_t start = 0; start < n; start += kChunk)
        std::memset(p + start, 0, static_cast<std::size_t>(std::min(kChunk, n - start)));
}

}  // namespace tune::kernels
