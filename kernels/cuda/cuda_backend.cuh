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

    void* allocate(std::uint64_t bytes) override;
    void deallocate(void* ptr, std::uint64_t bytes) noexcept override;
    std::uint64_t live_bytes() const override;
    void copy_to_device(void* dst, const void* host_src, std::uint64_t bytes) override;
    void copy_to_host(void* host_dst, const void* src, std::uint64_t bytes) override;
    void copy(void* dst, const void* src, std::uint64_t bytes) override;
    void fill_zero(void* dst, std::uint64_t bytes) override;
    void synchronize() override;

    std::uint64_t gemm_workspace_bytes(const GemmArgs& args) const override;
    void gemm(const GemmArgs& args, Workspace ws) override;

    void embedding_forward(void* out, const std::int32_t* tokens, const void* table, std::int64_t n, std::int64_t c,
                           std::int64_t vocab, DType dtype) override;
    std::uint64_t embedding_backward_workspace_bytes(std::int64_t n, std::int64_t c, std::int64_t vocab,
                                                     DType dtype) const override;
    void embedding_backward(void* dtable, const std::int32_t* tokens, const void* dout, std::int64_t n,
                            std::int64_t c, std::int64_t vocab, DType dtype, Workspace ws) override;

    void rmsnorm_forward(void* out, float* rstd, const void* x, const void* weight, std::int64_t n, std::int64_t c,
                         float eps, DType dtype) override;
    void rmsnorm_backward(void* dx, void* dweight, const void* dout, const void* x, const void* weight,
                          const float* rstd, std::int64_t n, std::int64_t c, bool accumulate_dx,
                          DType dtype) override;

    void rope_forward(void* out, std::int64_t out_stride, const void* in, std::int64_t in_stride, std::int64_t batch,
                      std::int64_t seq, std::int64_t heads, std::int64_t head_dim, float theta,
                      DType dtype) override;
    void rope_backward(void* din, std::int64_t din_stride, const void* dout, std::int64_t dout_stride,
                       std::int64_t batch, std::int64_t seq, std::int64_t heads, std::int64_t head_dim, float theta,
                       DType dtype) override;

    std::uint64_t attention_workspace_bytes(const AttentionShape& shape, AttentionKind kind,
                                            DType dtype) const override;
    void attention_forward(const AttentionForwardArgs& args, Workspace ws) override;
    void attention_backward(const AttentionBackwardArgs& args, Workspace ws) override;

    void swiglu_forward(void* out, const void* gate, const void* up, std::int64_t n, std::int64_t f,
                        std::int64_t in_stride, DType dtype) override;
    void swiglu_backward(void* dgate, void* dup, const void* dout, const void* gate, const void* up, std::int64_t n,
                         std::int64_t f, std::int64_t in_stride, DType dtype) override;

    void add(void* out, const void* a, const void* b, std::int64_t n, DType dtype) override;
    void scale(void* x, std::int64_t n, float s, DType dtype) override;
    void cast(void* dst, DType dst_dtype, const void* src, DType src_dtype, std::int64_t n) override;
    void unscale(void* x, std::int64_t n, float s, float* found_inf, DType dtype) override;
    void sum_squares(float* sum, const void* x, std::int64_t n, DType dtype) override;
    void neftune_noise(void* x, std::int64_t n, float scale, std::uint64_t seed, DType dtype) override;

    void cross_entropy(const CrossEntropyArgs& args) override;

    void adamw_update(const ParamTensor& p, void* m, void* v, DType state_dtype, const AdamWParams& hp) override;
    void lion_update(const ParamTensor& p, void* m, DType state_dtype, const LionParams& hp) override;
    void adam8bit_update(const ParamTensor& p, std::uint8_t* m_codes, std::uint8_t* v_codes, float* absmax_m,
                         float* absmax_v, const Adam8bitParams& hp) override;
    void adafactor_update(const ParamTensor& p, std::int64_t rows, std::int64_t cols, void* row_stat,
                          void* col_stat, DType state_dtype, const AdafactorParams& hp) override;
    void sgd_update(const ParamTensor& p, const SgdParams& hp) override;
    void adafactor_partial_sums(const AdafactorPiece& piece, float* param_sq, float* row_sums, float* col_sums,
                                const AdafactorParams& hp) override;
    void adafactor_statistics(const AdafactorPiece& piece, const float* row_sums, const float* col_sums,
                              float* row_mean, float* update_sq, const AdafactorParams& hp) override;
    void adafactor_apply(const AdafactorPiece& piece, const float* param_sq, const float* row_mean,
                         const float* update_sq, const AdafactorParams& hp) override;
    void nf4_quantize(void* q, const float* x, std::int64_t n, float* absmax) override;
    void nf4_dequantize(void* out, DType dtype, const void* q, std::int64_t n, std::int64_t begin,
                        std::int64_t count) override;

private:
    // Flash attention (flash_attention.cu); attention_forward/backward dispatch on AttentionKind::fused.
    void flash_attention_forward(const AttentionForwardArgs& args);
    void flash_attention_backward(const AttentionBackwardArgs& args);
    void raise_device_errors();  // after a synchronisation: throws what kernels recorded

    int device_;
    std::string name_;
    cudaStream_t stream_ = nullptr;
    CudaMemoryStats init_stats_;
    std::unique_ptr<MemoryPool> pool_;
    std::unique_ptr<DevicePages> pages_;  // nullptr: large buffers come from pool_ too
    std::unique_ptr<GemmLt> gemm_;
    BackendScratch scratch_;
    void* scratch_block_ = nullptr;
};

// Fills this device's constant-memory copy of the 8-bit Adam dynamic maps
// (optim_adam8bit.cu); the backend calls it once at construction.
void upload_quant_maps();

}  // namespace tune::kernels::cuda
