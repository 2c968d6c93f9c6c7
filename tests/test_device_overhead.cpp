// The `overhead` component of a GPU trial from the CUDA backend's memory
// statistics: everything the device holds for this process beyond what the
// tagged allocator handed out at its peak.
#include <catch2/catch.hpp>

#include "train/memory/device_overhead.h"

using namespace tune;

TEST_CASE("device overhead sums the context, cuBLAS, backend scratch and pool slack", "[trial][cuda]") {
    kernels::CudaMemoryStats s;
    s.context_bytes = 500 << 20;
    s.cublas_bytes = 40 << 20;
    s.backend_bytes = 1 << 20;
    s.pool_reserved_high_bytes = 3000ull << 20;
    const std::uint64_t peak = 2990ull << 20;  // the pool kept 10 MiB beyond the allocator's peak
    CHECK(train::device_overhead_bytes(s, peak) == (500ull + 40 + 1 + 10) << 20);
}

TEST_CASE("GEMM tuning scratch is counted once, through the pool that held it", "[trial][cuda]") {
    // The tuning scratch came from the pool: the 8 MiB it still reserves for
    // it are already in the slack; adding gemm_tuning_bytes counted them twice.
    kernels::CudaMemoryStats s;
    s.context_bytes = 500 << 20;
    s.gemm_tuning_bytes = 8 << 20;
    s.pool_reserved_high_bytes = 3008ull << 20;
    CHECK(train::device_overhead_bytes(s, 3000ull << 20) == (500ull + 8) << 20);
}

TEST_CASE("a pool that never reserved beyond the allocator's peak adds no slack", "[trial][cuda]") {
    kernels::CudaMemoryStats s;
    s.context_bytes = 100;
    s.pool_reserved_high_bytes = 50;  // e.g. statistics read on a fresh pool
    CHECK(train::device_overhead_bytes(s, 80) == 100);
}
