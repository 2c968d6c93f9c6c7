// The Llama decoder layer as Hugging Face's LlamaDecoderLayer computes it
// (RMSNorm, Q/K/V with grouped KV heads, rotate-half RoPE, causal attention,
// output projection, residual, RMSNorm, SwiGLU MLP, residual), forward,
// recompute and backward on Backend ops over a layer's flat weight buffer.
// The variants the estimator counts run too: biases on the linears
// (Qwen2's q, k, v; attention_bias, mlp_bias), added as a rank-1 GEMM with a
// ones vector; Qwen3's q/k norms (Qwen3Attention: q_norm over each head of
// the q projection, before RoPE); head_dim apart from hidden/heads; and
// rope_scaling's frequencies.
// Buffers follow docs/memory-model.md §3-4 exactly: what is allocated, in
// which dtype, with which tag, and when it is freed.
#pragma once

#include <cstdint>
#include <initializer_list>

#include "core/config.h"
#include "kernels/backend.h"
#include "train/comm/comm.h"
#include "train/grad_targets.h"
#include "train/lora.h"
#include "train/memory/memory.h"
#include "train/param_layout.h"
#include "train/qlora_base.h"

namespace tune::train {

// Token and model shapes of one micro-batch on one rank.
struct Dims {
    std::int64_t b = 0, s = 0, T = 0;                 // rows, context, tokens = b*s
    std::int64_t h = 0, q = 0, kv = 0, f = 0, V = 0;  // q = heads*d, which head_dim may set apart from h
    std::int64_t heads = 0, kv_heads = 0, d = 0, L = 0;
    float eps = 1e-5f;
    math::RopeFrequencies rope;
    bool qk_norm = false;  // RMSNorm over each head of q and k before RoPE (Qwen3)
    kernels::AttentionKind attention = kernels::AttentionKind::fused;  // flash keeps lse, eager probs
};
// RoPE's frequencies from rope_theta and rope_scaling (linear, llama3; the
// trainer refuses other types first: train/io/hf_model.h).
math::RopeFrequencies rope_frequencies(const ModelSpec& model);
Dims make_dims(const ModelSpec& model, std::int64_t micro_batch, std::int64_t context,
               Attention attention = Attention::flash);

// What one layer's forward leaves for its backward (§3). Empty handles are
// buffers the Checkpointing mode freed.
struct LayerActivations {
    Buffer x;       // (T, h) layer input
    Buffer rstd1;   // (T) fp32
    Buffer n1;      // (T, h)
    Buffer qp;      // q/k norm only: (T, q) the q projection before its norm
    Buffer kp;      // q/k norm only: (T, kv)
    Buffer rstd_q;  // q/k norm only: (T * heads) fp32
    Buffer rstd_k;  // q/k norm only: (T * kv_heads) fp32
    Buffer q;       // (T, q) after RoPE; fused with k, v (LlamaLayer::fused_qkv): (T, q + 2kv), rows [q | k | v]
    Buffer k;       // (T, kv) after RoPE; empty when fused into q
    Buffer v;       // (T, kv); empty when fused into q
    Buffer probs;   // eager: (b, heads, s, s); flash: the log-sum-exp (b, heads, s) fp32
    Buffer o;       // (T, q) attention output before Wo
    Buffer x2;      // (T, h) x + o Wo^T
    Buffer rstd2;   // (T) fp32
    Buffer n2;      // (T, h)
    Buffer g;       // (T, f) gate; fused with up (LlamaLayer::fused_gate_up): (T, 2f), rows [g | u]
    Buffer u;       // (T, f) up; empty when fused into g
    Buffer m;       // (T, f) silu(g) * u
    Buffer xa;      // LoRA: (targets, T, r) x A^T of each adapted linear, for dB
};

// Where weight gradients go: the persistent gradient buffer, a ZeRO bucket,
// or LOMO's one tensor at a time. begin() returns a buffer an op that only adds
// accumulates into (zeroed or holding earlier micro-batches); begin_whole() is
// for an op that writes every element, which overwrites a fresh target
// (train/grad_targets.h); end() says the tensor's gradient for this backward
// is complete.
class GradSink {
public:
    virtual ~GradSink() = default;
    virtual void* begin(std::size_t buffer, std::size_t tensor) = 0;
    virtual GradTarget begin_whole(std::size_t buffer, std::size_t tensor) { return {begin(buffer, tensor), false}; }
    virtual void end(std::size_t buffer, std::size_t tensor) = 0;
    // Around all the gradients of one flat buffer in one backward phase (ZeRO
    // stages 2-3 hold a bucket of the whole buffer in between).
    virtual void open(std::size_t) {}
    virtual void close(std::size_t) {}
    // The micro-batch's backward is over: nothing it queued may outlive it.
    virtual void finish() {}
};

class LlamaLayer {
public:
    LlamaLayer(kernels::Backend& backend, Allocator& memory, const Dims& dims, const ParamLayout& layout,
               kernels::DType dtype)
        : backend_(backend), memory_(memory), dims_(dims), layout_(layout), dt_(dtype) {}

    // The largest scratch any op of a layer's forward or backward asks for.
    std::uint64_t workspace_bytes() const;
    void set_workspace(kernels::Workspace ws) { ws_ = ws; }
    // LoRA: the base weights are frozen (no weight gradients), and every
    // call below takes the layer's adapter buffer (`adapters`).
    void set_lora(const LoraSpec* lora) { lora_ = lora; }
    // QLoRA: `weights` points to a QuantizedLayer, and each GEMM first
    // dequantizes its weight into `dequantized` (the largest matrix, in the layer dtype).
    void set_qlora(void* dequantized) { dequantized_ = dequantized; }
    // Elements of the largest weight matrix a GEMM of the layer reads.
    std::int64_t largest_matrix() const;
    // Biases: (T) ones in the layer dtype, the left factor of every bias GEMM.
    void set_ones(const void* ones) { ones_ = ones; }
    // Tensor parallelism (core/parallel_plan.h): the weights are this rank's shards, and the row-parallel
    // outputs (x2, the layer output) and the column-parallel regions' input gradients (dn) are summed over
    // `group`; the residual enters the sum on its rank 0 only. With sequence parallelism the residual
    // stream (x, n1, x2, n2, their rstd, the output and its gradient) holds this rank's rows() of the
    // tokens: each region gathers its input whole (tag comm) and reduce-scatters its output.
    void set_tensor_parallel(Comm* group, bool sequence_parallel) {
        tensor_group_ = group;
        sequence_parallel_ = group != nullptr && sequence_parallel;
    }
    // q, k, v and gate, up as one GEMM each way, where core/projection_fusion.h says the trial allows
    // it (their weights must be adjacent in the layout: a logic_error where they are not).
    void set_fused_projections(bool qkv, bool gate_up);
    // Rows of the residual stream on this rank: T, or T / tp with sequence parallelism.
    std::int64_t rows() const { return sequence_parallel_ ? dims_.T / tensor_group_->world_size() : dims_.T; }
    // Every token's (T, h) from this rank's rows() of it: with sequence parallelism gathered into a whole
    // buffer (tag comm, freed with the result), else the rows themselves.
    struct EveryToken {
        Buffer gathered;  // empty without sequence parallelism
        const void* ptr = nullptr;
    };
    EveryToken every_token(const void* part) const;
    // y (T, h) summed over the group: in place, or with sequence parallelism reduce-scattered; returns this
    // rank's rows of the sum (y itself without sequence parallelism).
    void* reduce_over_group(void* y) const;

    // Allocates every §3 buffer but x (which holds the input), computes the
    // layer, and writes x + attention + MLP into `out` (T, h) when not null.
    void forward(const void* weights, LayerActivations& a, void* out, const void* adapters = nullptr);
    // Frees what `mode` does not keep after a layer's forward.
    void drop(LayerActivations& a, Checkpointing mode) const;
    // Brings a layer back to the full §3 set before its backward.
    void recompute(const void* weights, LayerActivations& a, Checkpointing mode, const void* adapters = nullptr);
    // dx (T, h): the gradient of the layer output in, of the layer input out.
    // Weight gradients go to sink (buffer index `layer`). Frees `a`.
    // With LoRA the sink receives the adapters' gradients (the adapter layout's tensors).
    void backward(const void* weights, LayerActivations& a, void* dx, GradSink& sink, std::size_t layer,
                  const void* adapters = nullptr);

private:
    const void* weight(const void* weights, LayerTensor t) const;
    Buffer act(std::int64_t elements) const;  // activations tag, layer dtype
    // c (m, n) = op(a) op(b) + beta c, or + beta c_in where c_in is given.
    void gemm(const void* a, bool ta, const void* b, bool tb, void* c, std::int64_t m, std::int64_t n, std::int64_t k,
              float beta, const void* c_in = nullptr) const;
    void attention(LayerActivations& a) const;
    void mlp_backward(const void* w, LayerActivations& a, void* dx, void* dn, void* scratch, GradSink& sink,
                      std::size_t layer) const;
    void attention_backward(const void* w, LayerActivations& a, void* dx, void* dn, void* scratch, GradSink& sink,
                            std::size_t layer) const;
    kernels::AttentionShape attention_shape() const;
    // LoRA on linear t, when it has adapters: y += s (x A^T) B^T, keeping x A^T.
    void lora_forward(LayerActivations& a, LayerTensor t, const void* x, void* y) const;
    // dx += s (dy B) A, then dA and dB to the sink; tmp holds (T, r).
    void lora_backward(LayerActivations& a, LayerTensor t, const void* x, const void* dy, void* dx, void* tmp,
                       GradSink& sink, std::size_t layer) const;
    LoraLinear lora_linear(LayerTensor t) const;
    // Where a GEMM writes a weight's (or bias's) gradient; a null target when the base is frozen.
    GradTarget weight_grad(GradSink& sink, std::size_t layer, LayerTensor t) const;
    // Where a norm adds its weight's gradient: the sink's, or the throwaway one under LoRA.
    void* norm_grad(GradSink& sink, std::size_t layer, LayerTensor t) const;
    // y (T, n) += ones (T, 1) b (1, n), when the model has bias t (a row-parallel one: on tp rank 0 only).
    void add_bias(const void* w, LayerTensor t, void* y) const;
    // One linear forward: y (T, n) = beta y + x W^T (x (T, k)), then its bias and adapter; with
    // `residual`, y = residual + x W^T instead (the GEMM reads it: no copy into y first).
    void project(const void* w, LayerActivations& a, LayerTensor t, LayerTensor bias, const void* x, void* y,
                 std::int64_t n, std::int64_t k, float beta, const void* residual = nullptr);
    // x2 = x + o Wo^T + bo: the attention block's residual, with its adapter.
    void attention_residual(const void* w, LayerActivations& a);
    // db (n) += ones^T (1, T) dy (T, n) to the sink, when t exists and is trained.
    void bias_grad(const void* dy, LayerTensor t, GradSink& sink, std::size_t layer) const;
    // Qwen3: q, k (pre-norm in qp, kp) normed per head into a.q, a.k.
    void qk_norm_forward(const void* w, LayerActivations& a) const;
    // dq, dk (post-norm gradients) to the projections' gradients in dq_out, dk_out.
    void qk_norm_backward(const void* w, LayerActivations& a, const void* dq, const void* dk, void* dq_out,
                          void* dk_out, GradSink& sink, std::size_t layer) const;
    void end_grad(GradSink& sink, std::size_t layer, LayerTensor t) const;
    bool flash() const;
    // q, k, v as one GEMM each way: [Wq; Wk; Wv] (q + 2kv, h), their outputs one buffer of rows [q | k | v].
    bool fused_qkv() const { return fused_qkv_; }
    // Row strides of q and of k, v (their widths, or q + 2kv fused), and where k and v start.
    std::int64_t q_stride() const { return fused_qkv_ ? dims_.q + 2 * dims_.kv : dims_.q; }
    std::int64_t kv_stride() const { return fused_qkv_ ? dims_.q + 2 * dims_.kv : dims_.kv; }
    void* k_out(const LayerActivations& a) const;
    void* v_out(const LayerActivations& a) const;
    // Gate and up as one GEMM each way: [Wg; Wu] (2f, h), their outputs one (T, 2f) buffer of rows [g | u].
    bool fused_gate_up() const { return fused_gate_up_; }
    // gate's and up's outputs, and their row stride.
    const void* gate_out(const LayerActivations& a) const { return a.g.get(); }
    const void* up_out(const LayerActivations& a) const;
    std::int64_t gate_up_stride() const { return fused_gate_up() ? 2 * dims_.f : dims_.f; }
    Buffer attention_keep() const;  // what attention keeps for backward: lse (flash) or probs (eager)
    void recompute_unsaved(const void* weights, LayerActivations& a);  // selective_op's dropped tensors
    // Where the residual enters a row-parallel sum: every rank alone, tensor-parallel rank 0 (the group sums).
    bool adds_residual() const { return tensor_group_ == nullptr || tensor_group_->rank() == 0; }
    // The backward of row-parallel linear t (o, down) of input x (T, k): din (T, k) = dY W and dW += dY^T x, with
    // dY every token's output gradient (dx gathered with sequence parallelism).
    void row_parallel_backward(const void* w, LayerActivations& a, LayerTensor t, LayerTensor bias, const void* x,
                               const void* dx, void* din, std::int64_t k, GradSink& sink, std::size_t layer) const;
    // The column-parallel linears sharing input x (this rank's rows of it): dn (T, h) += s (dy B) A for
    // each adapter, then the adapters' or the base's weight gradients against every token's x.
    struct ColumnGrad {
        LayerTensor t;
        const void* dy;  // (T, n), n = the rank's output features of t
        std::int64_t n;
        std::int64_t stride = 0;  // dy's row stride where it is a column block of a fused gradient; 0: n
    };
    void column_parallel_backward(LayerActivations& a, const void* x, std::initializer_list<ColumnGrad> linears,
                                  void* dn, GradSink& sink, std::size_t layer) const;
    // out (rows(), h) = residual + y W^T over the group: the row-parallel linear `t` of input x (T, k).
    void row_parallel(const void* w, LayerActivations& a, LayerTensor t, LayerTensor bias, const void* x,
                      std::int64_t k, const void* residual, void* out);

    kernels::Backend& backend_;
    Allocator& memory_;
    Dims dims_;
    const ParamLayout& layout_;
    kernels::DType dt_;
    kernels::Workspace ws_;
    const LoraSpec* lora_ = nullptr;
    const void* adapters_ = nullptr;  // the layer's adapters during a call
    void* lora_tmp_ = nullptr;        // (T, r) during a LoRA backward
    void* norm_sink_ = nullptr;       // (h) during a LoRA backward
    void* dequantized_ = nullptr;     // QLoRA: the dequantized weight of the current GEMM
    const void* ones_ = nullptr;      // biases: (T) ones
    Comm* tensor_group_ = nullptr;    // tensor parallelism's group, or none
    bool sequence_parallel_ = false;
    bool fused_qkv_ = false;
    bool fused_gate_up_ = false;
};

}  // namespace tune::train
