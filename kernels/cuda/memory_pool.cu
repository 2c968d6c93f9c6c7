// The backend's stream-ordered memory pool.
#include "kernels/cuda/memory_pool.cuh"

#include <fmt/format.h>

#include <limits>

#include "kernels/cuda/cuda_check.h"
#include "kernels/error.h"

namespace tune::kernels::cuda {

MemoryPool::MemoryPool(int device, cudaStream_t stream) : stream_(stream) {
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = device;
    TUNE_CUDA_CHECK(cudaMemPoolCreate(&pool_, &props));
    // Keep everything freed: a training step frees and reallocates the same
    // activation sizes every micro-batch, and returning memory to the driver
    // in between would cost a synchronisation each time.
    std::uint64_t keep_all = std::numeric_limits<std::uint64_t>::max();
    TUNE_CUDA_CHECK(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold, &keep_all));
}

MemoryPool::~MemoryPool() {
    // Destructors cannot throw; a failure here leaves nothing to report to.
    cudaStreamSynchronize(stream_);
    cudaMemPoolDestroy(pool_);
}

void* MemoryPool::allocate(std::uint64_t bytes) {
    if (bytes == 0) return nullptr;
    void* ptr = nullptr;
    const cudaError_t status = cudaMallocFromPoolAsync(&ptr, bytes, pool_, stream_);
    if (status == cudaErrorMemoryAllocation) {
        cudaGetLastError();  // not sticky: clear it so later calls (and the report) work
        std::size_t free_bytes = 0, total_bytes = 0;
        cudaMemGetInfo(&free_bytes, &total_bytes);
        throw OutOfMemoryError(bytes, live_.load(),
                               fmt::format("cuda pool reserves {} bytes; device has {} of {} bytes free",
                                           reserved_bytes(), free_bytes, total_bytes));
    }
    TUNE_CUDA_CHECK(status);
    live_ += bytes;
    return ptr;
}

void MemoryPool::deallocate(void* ptr, std::uint64_t bytes) noexcept {
    if (ptr == nullptr) return;
    // Stream-ordered: the block is reused only by work queued after this point.
    if (cudaFreeAsync(ptr, stream_) != cudaSuccess) cudaGetLastError();
    live_ -= bytes;
}

std::uint64_t MemoryPool::attribute(cudaMemPoolAttr attr) const {
    std::uint64_t value = 0;
    TUNE_CUDA_CHECK(cudaMemPoolGetAttribute(pool_, attr, &value));
    return value;
}

void MemoryPool::trim() { TUNE_CUDA_CHECK(cudaMemPoolTrimTo(pool_, 0)); }

void MemoryPool::reset_high_marks() {
    std::uint64_t zero = 0;  // "set to 0" resets a high-water mark to the current value
    TUNE_CUDA_CHECK(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReservedMemHigh, &zero));
    TUNE_CUDA_CHECK(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrUsedMemHigh, &zero));
}

std::uint64_t MemoryPool::reserved_bytes() const { return attribute(cudaMemPoolAttrReservedMemCurrent); }
std::uint64_t MemoryPool::reserved_high_bytes() const { return attribute(cudaMemPoolAttrReservedMemHigh); }
std::uint64_t MemoryPool::used_high_bytes() const { return attribute(cudaMemPoolAttrUsedMemHigh); }

}  // namespace tune::kernels::cuda
