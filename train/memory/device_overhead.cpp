#include "train/memory/device_overhead.h"

namespace tune::train {

std::uint64_t device_overhead_bytes(const kernels::CudaMemoryStats& s, std::uint64_t allocator_peak) {
    // Each high-water mark is its own moment, so their sum may pass what the device held at once: an upper bound.
    const std::uint64_t held = s.pool_reserved_high_bytes + s.pages_high_bytes;
    const std::uint64_t pool_slack = held > allocator_peak ? held - allocator_peak : 0;
    // GEMM tuning scratch comes from the pool: what it still holds of it is in
    // the pool's reserve (pool_slack), so it is not added again.
    return s.context_bytes + s.cublas_bytes + s.backend_bytes + pool_slack;
}

}  // namespace tune::train
