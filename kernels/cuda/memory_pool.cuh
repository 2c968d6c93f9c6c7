// Device memory for one backend: a private stream-ordered pool
// (cudaMallocFromPoolAsync) whose release threshold is "never", so freed
// blocks stay reserved and are reused without returning to the driver. The
// pool's reserved high-water mark is the device memory the trainer's buffers
// really cost, allocation granularity and fragmentation included.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>

namespace tune::kernels::cuda {

class MemoryPool {
public:
    MemoryPool(int device, cudaStream_t stream);
    ~MemoryPool();
    MemoryPool(const MemoryPool&) = delete;
    MemoryPool& operator=(const MemoryPool&) = delete;

    // Raises OutOfMemoryError (requested, live) when the device cannot
    // satisfy it; the error is cleared, so the process can go on and report.
    void* allocate(std::uint64_t bytes);
    void deallocate(void* ptr, std::uint64_t bytes) noexcept;

    std::uint64_t live_bytes() const { return live_.load(); }
    std::uint64_t reserved_bytes() const;
    std::uint64_t reserved_high_bytes() const;
    std::uint64_t used_high_bytes() const;
    // Returns the unused memory the pool keeps to the device (the caller has waited for the stream).
    void trim();
    // Restarts both high-water marks from the current values.
    void reset_high_marks();

private:
    std::uint64_t attribute(cudaMemPoolAttr attr) const;

    cudaMemPool_t pool_ = nullptr;
    cudaStream_t stream_;
    std::atomic<std::uint64_t> live_{0};
};

}  // namespace tune::kernels::cuda
