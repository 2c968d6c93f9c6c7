// Rates measured on this machine (probe/, `tune probe`), which the time model
// uses per op instead of nominal peaks times an efficiency: GEMMs at the
// model's own shapes and dtypes, attention forward and backward per shape,
// and each optimizer's update in each precision.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/config.h"
#include "kernels/dtype.h"

namespace tune {

// Which of a linear layer's three GEMMs, each with the trainer's operand layout
// (train/model.cpp): forward Y (T, out) = X W^T; backward dX (T, in) = dY W;
// dW (out, in) += dY^T X, accumulated into the gradient.
enum class GemmPass : std::uint8_t { forward, input_grad, weight_grad };

// The operands' dtype a probe ran in, the trial's weights' (core/config.h
// weight dtype of its precision): bf16 and fp16 both take two bytes but convert
// at different costs on a CPU, so each is probed in its own.
enum class ProbeDtype : std::uint8_t { f32, bf16, f16 };
ProbeDtype probe_dtype(Precision p);
std::uint32_t probe_dtype_bytes(ProbeDtype d);
const char* probe_dtype_name(ProbeDtype d);  // "f32", "bf16", "f16"
std::optional<ProbeDtype> parse_probe_dtype(const std::string& name);
// The backend's dtype of a probe's (the same three, one for one).
inline kernels::DType kernel_dtype(ProbeDtype d) {
    switch (d) {
        case ProbeDtype::f32:
            return kernels::DType::f32;
        case ProbeDtype::bf16:
            return kernels::DType::bf16;
        case ProbeDtype::f16:
            return kernels::DType::f16;
    }
    return kernels::DType::f32;
}

// What a call does with C beyond its pass's layout, as the trainer calls it
// (train/model.cpp, kernels/lm_head_loss.cpp). In 16 bits both change the
// time on the CPU: an accumulating C is widened before the GEMM, an fp32 one
// is not narrowed after it, so a beta-0 probe of the same shape misprices both.
struct GemmOutput {
    // beta = 1 on a forward or dX call: the residual adds of o and down, and the
    // input gradients k, v and up sum into the one before. (dW always accumulates.)
    bool accumulate = false;
    bool fp32 = false;  // C in fp32 under 16-bit operands: the LM head's logits
    bool operator==(const GemmOutput&) const = default;
};

struct GemmRate {
    std::int64_t m = 0, n = 0, k = 0;  // C (m, n) = A (m, k) B (k, n)
    ProbeDtype dtype = ProbeDtype::f32;
    double flops_per_s = 0;
    GemmPass pass = GemmPass::forward;
    GemmOutput output;
};

struct AttentionRate {
    std::int64_t batch = 0, seq = 0, heads = 0, kv_heads = 0, head_dim = 0;
    ProbeDtype dtype = ProbeDtype::f32;
    bool fused = false;  // the implementation probed
    double forward_s = 0;
    double backward_s = 0;
};

// The element-wise ops of one micro-batch at the model's shapes (tokens rows):
// per layer two RMSNorms, RoPE on q and k and SwiGLU (the residuals enter the GEMMs);
// outside the layers the embedding, the final RMSNorm and the cross-entropy
// over the vocabulary. Each forward and backward, in seconds.
struct ElementwiseRate {
    std::int64_t tokens = 0;
    ProbeDtype dtype = ProbeDtype::f32;
    // The model's shape, for the probe to run at.
    std::int64_t hidden = 0, kv_dim = 0, ffn = 0, vocab = 0, heads = 0, kv_heads = 0, head_dim = 0;
    double layer_forward_s = 0;
    double layer_backward_s = 0;
    double outer_s = 0;  // forward and backward
};

// QLoRA's frozen base dequantized from NF4 into the compute dtype
// (train/model.cpp LlamaLayer::weight): one layer's seven matrices, each in
// its own call, as a step dequantizes them before each GEMM that reads one.
// On the CPU the nominal bandwidth had priced it about ten times short (the
// codes are unpacked and each weight's absmax decoded one by one).
struct DequantizeRate {
    ProbeDtype dtype = ProbeDtype::bf16;
    std::int64_t hidden = 0, kv_dim = 0, ffn = 0;  // the layer's shape
    double layer_s = 0;                            // seconds per pass over the layer's matrices
};

// A ZeRO-2/3 gradient bucket's memory work around its reduce-scatter
// (estimate/collective_calls.h CollectiveCall::bucket): the rank's slice of the
// bucket of `bytes` (bytes / ranks) added into its gradient shard: memory work
// no other probe prices.
// Under offload the shard is in the host's pinned memory and the add crosses
// the host link (train/trainer.cpp BucketSink): probed so, keyed where = host.
struct BucketRate {
    ProbeDtype dtype = ProbeDtype::f32;
    std::uint32_t ranks = 2;
    std::uint64_t bytes = 0;
    double seconds = 0;  // per bucket
    bool host = false;   // the shard in host memory (offload)
};

// Offload's copies from the host's pinned memory to the device (Backend::copy),
// at the bytes of one layer's parameter shard in the weights' dtype: what a
// gather of host-kept parameters moves, and half of what the device reads of
// the fp32 master after the host's update. Prices those terms over the
// preset's host link rate.
struct HostLinkRate {
    std::uint64_t bytes = 0;
    double bytes_per_s = 0;
};

// The collectives ZeRO uses, probed over MPI (CPU) or NCCL (GPU) at the sweep's world sizes.
enum class Collective : std::uint8_t { all_reduce, reduce_scatter, all_gather };

// nccl-tests' bus bandwidth: algbw = bytes / seconds (bytes: the buffer an
// all-reduce sums, the whole output of an all-gather, the whole input of a
// reduce-scatter), times what each rank must send per byte of it: 2(n-1)/n
// for an all-reduce, (n-1)/n for a reduce-scatter or all-gather. It compares
// with a link's rate, whatever the rank count.
double bus_bandwidth(Collective op, std::uint32_t ranks, double bytes, double seconds);
// The factor alone: 2(n-1)/n or (n-1)/n (0 for one rank).
double bus_factor(Collective op, std::uint32_t ranks);

struct CollectiveRate {
    Collective op = Collective::all_reduce;
    std::uint32_t ranks = 2;
    std::uint64_t bytes = 0;  // message size (see bus_bandwidth)
    double bus_bytes_per_s = 0;
    // The gradients' dtype, as the trainer calls the collective (reductions
    // average): on the CPU a 16-bit reduction is widened to fp32, summed over
    // MPI at twice the bytes and narrowed back (train/comm/comm_mpi.cpp), so an
    // fp32 probe of its bytes priced ZeRO-2/3 steps in 16 bits short.
    ProbeDtype dtype = ProbeDtype::f32;
};

// One tensor the optimizer updates with one backend call, (rows, cols) row-major
// as the trainer stores it; vectors have rows = 1.
struct TensorShape {
    std::int64_t rows = 1, cols = 0;
    std::int64_t numel() const { return rows * cols; }
    bool operator==(const TensorShape&) const = default;
};

// The tensors an optimizer probe updates, as the trainer calls the backend for
// them (train/optimizer_state.cpp: one call per tensor, in the buffer's order):
// every layer's tensors then the outer buffer's (embedding, final norm, LM head),
// or, with adapters, every layer's A (r, in) and B (out, r) per targeted linear;
// cut at max_elements (the last one's rows trimmed) so that a probe stays short
// on a large model while its calls keep the trainer's sizes.
//
// A CPU's update runs at the bandwidth of wherever its buffers live, so the
// probe takes the model's whole update, as large as a step's: a probe over one
// layer stays in the last-level cache, where a step's update, with the
// activations between two updates, does not. Cut at 2^22 elements (64 MiB of
// AdamW's fp32 buffers), out of that cache: a larger model's update goes at
// about the same pace per element.
//
// A GPU's calls of that size are launch-bound, an order of magnitude above
// what its bandwidth allows per element (measured on an H100: the
// probes-and-pace file in docs/results/), so device backends take 2^26
// elements (about 1 GiB of AdamW's mixed-precision buffers), where the
// calls' launches are a few percent.
inline constexpr std::int64_t kOptimizerProbeElements = 1 << 22;
inline constexpr std::int64_t kDeviceOptimizerProbeElements = 1 << 26;
std::vector<TensorShape> optimizer_probe_tensors(const ModelSpec& m, const TrialConfig& c,
                                                 std::int64_t max_elements = kOptimizerProbeElements);

// One optimizer step's update over `tensors` in one precision's dtypes (weights,
// gradients, master weights, states: train/model_state.cpp precision_plan),
// the gradients' sum of squares (the clipping norm) first: seconds per pass.
struct OptimizerRate {
    Optimizer optimizer = Optimizer::adamw;
    Precision precision = Precision::fp32;
    std::int64_t block = 256;  // 8-bit Adam's quantization block
    std::vector<TensorShape> tensors;
    double seconds = 0;
    // On the host's cores through the CPU backend, as offload updates (core/offload_plan.h), wherever
    // the sweep's device is; false: on the sweep's backend.
    bool host = false;
    std::int64_t elements() const;
};

struct ProbedRates {
    std::vector<GemmRate> gemm;
    std::vector<AttentionRate> attention;
    std::vector<CollectiveRate> collectives;
    std::vector<ElementwiseRate> elementwise;
    std::vector<OptimizerRate> optimizers;
    std::vector<DequantizeRate> dequantize;
    std::vector<BucketRate> buckets;
    std::vector<HostLinkRate> host_links;
    // Seconds of the speed reference (kernels/speed_reference.h) the rates were
    // taken beside (the machine's pace then); 0: unknown (a cache from before it).
    double speed_reference_s = 0;
    // On a GPU, what a process holds on the device beside its buffers: the
    // CUDA context, cuBLASLt, the backend's scratch, and the largest GEMM
    // tuning scratch the probes took at the sweep's shapes (a trial tunes the
    // same shapes in its first step, at its peak). The overhead a sweep's
    // estimates start from, before a trial measured one; unset on the CPU,
    // where each trial measures its own baseline.
    std::optional<std::uint64_t> device_baseline_bytes;

    bool empty() const {
        return gemm.empty() && attention.empty() && collectives.empty() && elementwise.empty() && optimizers.empty() &&
               dequantize.empty() && buckets.empty() && host_links.empty();
    }
    // Seconds per updated element of `c`'s optimizer in its precision: the probe over
    // c's own tensors (optimizer_probe_tensors, at whatever size the probe was cut),
    // else over any of the same optimizer, precision and block; nullopt when none was probed.
    std::optional<double> optimizer_seconds_per_element(const ModelSpec& m, const TrialConfig& c) const;
    // The same for the host's update under offload (OptimizerRate::host), with all of the host's cores.
    std::optional<double> host_optimizer_seconds_per_element(const ModelSpec& m, const TrialConfig& c) const;
    // The element-wise times at this many tokens per micro-batch, scaled linearly in
    // tokens from the nearest probed count of the same dtype; nullopt when none.
    std::optional<ElementwiseRate> elementwise_at(std::int64_t tokens, ProbeDtype dtype) const;
    // Seconds of one gradient bucket of `bytes` at this rank count and dtype: the probed
    // size nearest in bytes (log scale), scaled linearly in bytes; nullopt when none.
    std::optional<double> bucket_seconds(std::uint32_t ranks, double bytes, ProbeDtype dtype, bool host = false) const;
    // Host-to-device bytes per second at the probed size nearest `bytes`; nullopt when none was probed.
    std::optional<double> host_link_bytes_per_s(double bytes) const;
    // Seconds to dequantize one layer of `m` from NF4 into `dtype`; nullopt when not probed.
    std::optional<double> dequantize_layer_seconds(const ModelSpec& m, ProbeDtype dtype) const;
    // The bus bandwidth of `op` at this rank count, from the probed message size
    // nearest `bytes` (log scale); nullopt when none was probed at this rank count.
    std::optional<double> bus_bytes_per_s(Collective op, std::uint32_t ranks, double bytes) const;
    // Seconds of one call of `op` on a `bytes` buffer of `dtype` at this rank count: the
    // probed times (bytes * bus_factor / busbw) interpolated linearly in bytes
    // between the probed sizes, as latency plus bytes over bandwidth (the
    // alpha-beta model) between each pair; below the smallest probed size its
    // time (the latency floor), above the largest the last pair's slope (or,
    // with one size probed, its bandwidth). The probes of `dtype`, else (a cache
    // from before collectives were probed per dtype) the fp32 ones; nullopt when none.
    std::optional<double> collective_seconds(Collective op, std::uint32_t ranks, double bytes,
                                             ProbeDtype dtype = ProbeDtype::f32) const;
    // The probed rate of this shape, pass and output, else that of the probed shape
    // of the same dtype, pass and output nearest in FLOPs (log scale), else the
    // same whatever the output (a cache from before outputs were probed), else the
    // same over forward GEMMs; nullopt when no GEMM of the dtype was probed.
    std::optional<double> gemm_flops_per_s(std::int64_t m, std::int64_t n, std::int64_t k, ProbeDtype dtype,
                                           GemmPass pass = GemmPass::forward, GemmOutput output = {}) const;
    // Seconds of one attention forward and backward at this shape, scaled by
    // batch from the nearest probed one of the same kind; nullopt when none.
    std::optional<AttentionRate> attention_at(std::int64_t batch, std::int64_t seq, std::int64_t heads,
                                              std::int64_t head_dim, ProbeDtype dtype, bool fused) const;
};

}  // namespace tune
