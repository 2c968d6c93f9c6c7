// The CUDA backend class (internal to kernels/cuda: the rest of tune uses
// kernels/cuda/cuda_backend.h). One object owns the device binding, its
// stream, memory pool, cuBLASLt plans and small scratch; each op's launch
// code lives in the .cu file named for the op.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <string>

#include "kernels/backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/device_errors.cuh"
#include "kernels/cuda/device_pages.cuh"
#include "kernels/cuda/gemm_lt.cuh"
#include "kernels/cuda/host/cudnn_attention.h"
#include "kernels/cuda/memory_pool.cuh"

namespace tune::kernels::cuda {

// Device scratch the backend keeps for itself: reduction partials (so
// reductions are two fixed-order passes, deterministic) and the error record.
struct BackendScratch {
    static constexpr int kPartials = 1024;  // blocks of a reduction's first pass
    float* partials = nullptr;              // (3, kPartials): up to three reductions in flight per op
    DeviceErrorRecord* errors = nullptr;
    static constexpr std::uint64_t bytes() { return 3 * kPartials * sizeof(float) + 256; }
};

class CudaBackend final : public Backend {
public:
    explicit CudaBackend(const CudaBackendOptions& options);
    ~CudaBackend() override;
    CudaBackend(const CudaBackend&) = delete;
    CudaBackend& operator=(const CudaBackend&) = delete;

    std::string_view name() const override { return name_; }
    cudaStream_t stream() const { return stream_; }
    int device() const { return device_; }
    CudaMemoryStats memory_stats() const;
    void reset_memory_high_marks();
    PageMapper* page_mapper() override { return pages_.get(); }
    std::unique_ptr<OpGraph> record(std::function<void()> ops) override;
    bool records_device_work() const override { return true; }
    void trim_memory() override;
    std::unique_ptr<SideWork> beside(std::function<void()> ops) override;
    // Which attention ran: cuDNN's graphs (with their calls) or tune's kernels, and why.
    std::string attention_path() const {
        return cudnn_ ? cudnn_->path() : "tune's kernels (cuDNN: " + cudnn_why_not_ + ")";
    }

    void* allocate(std::uint64_t bytes) override;
    void deallocate(void* ptr, std::uint64_t bytes) noexcept override;
    // Pinned, portable and mapped (cudaHostAlloc): copies from it run at the
    // link's pinned rate, and kernels read and write it through the unified
    // address space (offload's gradient shards and master weights).
    void* allocate_host(std::uint64_t bytes) override;
    void deallocate_host(void* ptr, std::uint64_t bytes) noexcept override;
    std::uint64_t live_bytes() const override;
    void copy_to_device(void* dst, const void* host_src, std::uint64_t bytes) override;
    void copy_to_host(void* host_dst, const void* src, std::uint64_t bytes) override;
    void copy(void* dst, const void* src, std::uint64_t bytes) override;
    void fill_zero(void* dst, std::uint64_t bytes) override;
    void synchronize() override;

    TUNE_BACKEND_WORKSPACE_QUERIES(TUNE_OVERRIDE_WORKSPACE_QUERY)
    TUNE_BACKEND_OPS(TUNE_OVERRIDE_OP)

private:
    // Flash attention (flash_attention.cu); attention_forward/backward dispatch on AttentionKind::fused.
    void flash_attention_forward(const AttentionForwardArgs& args);
    void flash_attention_backward(const AttentionBackwardArgs& args);
    void raise_device_errors();  // after a synchronisation: throws what kernels recorded

    int device_;
    std::string name_;
    cudaStream_t stream_ = nullptr;       // where every op launches (beside() points it at side_stream_ a while)
    cudaStream_t side_stream_ = nullptr;  // beside()'s, made at its first call
    CudaMemoryStats init_stats_;
    std::unique_ptr<MemoryPool> pool_;
    std::unique_ptr<DevicePages> pages_;  // nullptr: large buffers come from pool_ too
    std::unique_ptr<GemmLt> gemm_;
    std::unique_ptr<cudnn::CudnnAttention> cudnn_;  // null: cuDNN is not usable here (cudnn_why_not_)
    std::string cudnn_why_not_;
    BackendScratch scratch_;
    void* scratch_block_ = nullptr;
};

// Fills this device's constant-memory copy of the 8-bit Adam dynamic maps
// (optim_adam8bit.cu); the backend calls it once at construction.
void upload_quant_maps();

}  // namespace tune::kernels::cuda
