// The CPU backend: OpenBLAS sgemm for matrix products (16-bit operands are
// widened into an fp32 workspace), OpenMP over rows for everything else.
// "Device" memory is host memory. It is the reference the CUDA backend is
// checked against, so every op follows kernels/backend.h to the letter.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "kernels/backend.h"

namespace tune::kernels {

struct CpuBackendOptions {
    int threads = 0;                 // OpenMP threads for ops; 0: omp_get_max_threads()
    std::uint64_t memory_limit = 0;  // allocate() beyond this many live bytes raises OutOfMemoryError; 0: none
};

class CpuBackend final : public Backend {
public:
    explicit CpuBackend(CpuBackendOptions options = {});

    std::string_view name() const override { return "cpu"; }
    int threads() const { return threads_; }

    void* allocate(std::uint64_t bytes) override;
    void deallocate(void* ptr, std::uint64_t bytes) noexcept override;
    std::uint64_t live_bytes() const override { return live_.load(); }
    void copy_to_device(void* dst, const void* host_src, std::uint64_t bytes) override;
    void copy_to_host(void* host_dst, const void* src, std::uint64_t bytes) override;
    void copy(void* dst, const void* src, std::uint64_t bytes) override;
    void fill_zero(void* dst, std::uint64_t bytes) override;
    void synchronize() override {}
    std::uint64_t private_cache_bytes() const override { return private_cache_bytes_; }

    // Workspaces, in bytes:
    //  - gemm: 4 per element of every 16-bit operand (each batch matrix packed
    //    (rows, cols), a stride-0 operand once); 0 when all operands are f32;
    //  - embedding backward: the token lists of kernels/workspace_bytes.h, as
    //    the CUDA backend's;
    //  - attention: per thread two (S, S) and eight (S, D) fp32 blocks (scores
    //    and their gradient, 16-bit staging), times threads(); the same for
    //    every dtype.
    TUNE_BACKEND_WORKSPACE_QUERIES(TUNE_OVERRIDE_WORKSPACE_QUERY)
    TUNE_BACKEND_OPS(TUNE_OVERRIDE_OP)

private:
    int threads_;
    std::uint64_t memory_limit_;
    std::uint64_t private_cache_bytes_;  // the level-2 cache of cpu0 (kernels/cpu/cpu_cache.h)
    std::atomic<std::uint64_t> live_{0};
};

}  // namespace tune::kernels
