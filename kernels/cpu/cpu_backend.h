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
    int threads = 0;                   // OpenMP threads for ops; 0: omp_get_max_threads()
    std::uint64_t memory_limit = 0;    // allocate() beyond this many live bytes raises OutOfMemoryError; 0: none
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

    // 4 bytes per element of every 16-bit operand (each batch matrix packed
    // (rows, cols), a stride-0 operand once); 0 when all operands are f32.
    std::uint64_t gemm_workspace_bytes(const GemmArgs& args) const override;
    void gemm(const GemmArgs& args, Workspace ws) override;

    void embedding_forward(void* out, const std::int32_t* tokens, const void* table, std::int64_t n, std::int64_t c,
                           std::int64_t vocab, DType dtype) override;
    // The token lists of kernels/workspace_bytes.h, as the CUDA backend's.
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

    // Per thread: two (S, S) and eight (S, D) fp32 blocks (scores and their
    // gradient, 16-bit staging), times threads(); the same for every dtype.
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
    int threads_;
    std::uint64_t memory_limit_;
    std::uint64_t private_cache_bytes_;  // the level-2 cache of cpu0 (kernels/cpu/cpu_cache.h)
    std::atomic<std::uint64_t> live_{0};
};

}  // namespace tune::kernels
