// The one interface every numeric op of the trainer goes through. The CPU
// backend (kernels/cpu) and the CUDA backend (kernels/cuda) implement it, and
// `tune selftest` runs every op on both and compares.
//
// Conventions, for every op:
//  - Pointers are device pointers (host memory on the CPU backend) to buffers
//    the caller allocated with allocate(); sizes and strides count elements.
//  - Tensors are row-major; shapes are written llm.c style beside each pointer,
//    with B batch, S sequence, C hidden, H heads, KVH key/value heads, D head
//    dim, F ffn, V vocab, N rows (= B*S tokens unless said otherwise).
//  - `dtype` is the storage type of the tensor data (f32, bf16 or f16);
//    arithmetic is fp32, reductions accumulate in fp32 or wider.
//  - Ops never allocate. An op that needs scratch memory has a
//    *_workspace_bytes() query and takes a Workspace at least that large.
//  - Ops are ordered on the backend's stream: results are visible to the host
//    after synchronize() or a copy_to_host(). Scalar outputs (losses,
//    found_inf, sums of squares) are fp32 values in device memory.
//  - "accumulates" means out += result; otherwise outputs are overwritten.
//  - Bad arguments (shapes, dtypes, small workspace) raise tune::BackendError.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>
#include <type_traits>

#include "kernels/dtype.h"
#include "kernels/math/rope.h"
#include "kernels/page_mapper.h"

namespace tune::kernels {

struct Workspace {
    void* ptr = nullptr;
    std::uint64_t bytes = 0;
};

// ---------------------------------------------------------------- GEMM ----

// Per batch index i (0 <= i < batch), row-major:
//   C_i (m, n) = alpha * op(A_i) (m, k) @ op(B_i) (k, n) + beta * C_i
// A_i is stored (m, k) with leading dimension lda >= k, or (k, m) with
// lda >= m when trans_a; likewise B_i (k, n) / (n, k) with trans_b. A_i starts
// at a + i*stride_a (stride 0 broadcasts one matrix over the batch).
// Dtypes: a_dtype == b_dtype; c_dtype is that dtype or f32. Accumulation is
// fp32. beta = 1 accumulates gradients into C. With c_in, beta * c_in (C's
// dtype and layout) is read in place of beta * C and the result written to C,
// so a residual stream enters a product without first being copied into C.
struct GemmArgs {
    std::int64_t m = 0, n = 0, k = 0;
    bool trans_a = false, trans_b = false;
    const void* a = nullptr;
    std::int64_t lda = 0, stride_a = 0;
    const void* b = nullptr;
    std::int64_t ldb = 0, stride_b = 0;
    void* c = nullptr;
    std::int64_t ldc = 0, stride_c = 0;
    const void* c_in = nullptr;  // C itself or disjoint from it; null: C
    std::int64_t batch = 1;
    float alpha = 1.0f, beta = 0.0f;
    DType a_dtype = DType::f32, b_dtype = DType::f32, c_dtype = DType::f32;
};

// Where a GEMM reads beta's C from.
inline const void* c_source(const GemmArgs& g) { return g.c_in != nullptr ? g.c_in : g.c; }

// ----------------------------------------------------------- attention ----

// `materialized` (eager) keeps the (B, H, S, S) softmax probabilities for
// backward; `fused` (flash attention: tiles, an online softmax) keeps only the
// (B, H, S) fp32 log-sum-exp and recomputes the scores tile by tile in
// backward from q, k, lse and the output O (D = rowsum(dO * O)).
enum class AttentionKind : std::uint8_t { materialized, fused };

// Causal self-attention with grouped key/value heads: query head h reads
// key/value head h / (H / KVH). Scores are scaled by 1/sqrt(D).
struct AttentionShape {
    std::int64_t batch = 0;     // B
    std::int64_t seq = 0;       // S
    std::int64_t heads = 0;     // H, a multiple of KVH
    std::int64_t kv_heads = 0;  // KVH
    std::int64_t head_dim = 0;  // D
};

// Token (b, s) of q starts at q + (b*S + s) * q_stride, its head h at
// + h*D; strides let q, k, v be column blocks of one fused QKV output.
struct AttentionForwardArgs {
    AttentionShape shape;
    AttentionKind kind = AttentionKind::materialized;
    DType dtype = DType::f32;
    const void* q = nullptr;  // (B, S, H, D)   row stride q_stride >= H*D
    const void* k = nullptr;  // (B, S, KVH, D) row stride k_stride >= KVH*D
    const void* v = nullptr;  // (B, S, KVH, D) row stride v_stride >= KVH*D
    std::int64_t q_stride = 0, k_stride = 0, v_stride = 0;
    void* out = nullptr;  // (B, S, H, D)   row stride out_stride >= H*D
    std::int64_t out_stride = 0;
    void* probs = nullptr;  // (B, H, S, S) in dtype, materialized: written (upper triangle 0), kept for backward
    float* lse = nullptr;   // (B, H, S) fused only
};

struct AttentionBackwardArgs {
    AttentionShape shape;
    AttentionKind kind = AttentionKind::materialized;
    DType dtype = DType::f32;
    const void* q = nullptr;  // (B, S, H, D)   as in forward
    const void* k = nullptr;  // (B, S, KVH, D)
    const void* v = nullptr;  // (B, S, KVH, D)
    std::int64_t q_stride = 0, k_stride = 0, v_stride = 0;
    const void* probs = nullptr;  // (B, H, S, S) materialized: from forward
    const void* out = nullptr;    // (B, S, H, D) fused only, with out_stride
    const float* lse = nullptr;   // (B, H, S) fused only
    std::int64_t out_stride = 0;
    const void* dout = nullptr;  // (B, S, H, D)   row stride dout_stride
    std::int64_t dout_stride = 0;
    void* dq = nullptr;  // (B, S, H, D)   overwritten, row stride q_stride; may alias dout (same stride)
    void* dk = nullptr;  // (B, S, KVH, D) overwritten, row stride k_stride
    void* dv = nullptr;  // (B, S, KVH, D) overwritten, row stride v_stride
};

// ----------------------------------------------------------- embedding ----

// The tokens an embedding table holds: [begin, begin + its rows) of a vocabulary of `total`
// (0: the table is the whole vocabulary).
struct VocabRange {
    std::int64_t begin = 0;
    std::int64_t total = 0;
    std::int64_t total_or(std::int64_t rows) const { return total > 0 ? total : rows; }
};

// ------------------------------------------------------- cross-entropy ----

// Fused forward and backward over N rows of fp32 logits:
//   losses[r] = logsumexp(logits[r]) - logits[r, targets[r]]
//   dlogits[r] = grad_scale * (softmax(logits[r]) - onehot(targets[r]))
// A negative target marks a row to ignore (loss 0, gradient 0). With
// grad_scale = loss_scale / (tokens in the optimizer step) the gradient is
// that of the mean loss. Chunk over rows by calling it on row ranges
// (see kernels/lm_head_loss.h for the LM head + loss in chunks).
//
// A vocabulary-parallel shard (its logits the columns [vocab_begin, vocab_begin
// + V) of a vocabulary of vocab_total) runs in three stages, the shards
// combining `stats` (3, N) fp32 between them (kernels/lm_head_loss.cpp):
//   max       stats[0] = the row's max over the shard  -> the max over shards
//   sum       stats[1] = sum exp(logits - stats[0]),
//             stats[2] = the target's logit where the shard holds it, else 0
//                                                      -> each summed over shards
//   finish    losses = log(stats[1]) + stats[0] - stats[2];
//             dlogits = grad_scale * (exp(logits - stats[0]) / stats[1] - onehot)
// Targets are ids of the whole vocabulary; one >= vocab_total is reported.
enum class CrossEntropyStage : std::uint8_t { whole, max, sum, finish };

struct CrossEntropyArgs {
    std::int64_t rows = 0;                  // N
    std::int64_t vocab = 0;                 // V: the columns of `logits`
    const float* logits = nullptr;          // (N, V) fp32
    const std::int32_t* targets = nullptr;  // (N)
    float* losses = nullptr;                // (N) per-row loss in nats
    void* dlogits = nullptr;                // (N, V) in dlogits_dtype; may alias logits when f32; nullptr: forward only
    DType dlogits_dtype = DType::f32;
    float grad_scale = 1.0f;
    CrossEntropyStage stage = CrossEntropyStage::whole;
    std::int64_t vocab_begin = 0;  // a shard's first column in the whole vocabulary
    std::int64_t vocab_total = 0;  // the whole vocabulary; 0: vocab
    float* stats = nullptr;        // (3, N) the stages' row statistics
    std::int64_t total_vocab() const { return vocab_total > 0 ? vocab_total : vocab; }
};

// ---------------------------------------------------------- optimizers ----

// Elements [begin, end) of a ParamTensor, counted from its first.
struct ElementRange {
    std::int64_t begin = 0, end = 0;
};

// One parameter tensor (contiguous) as the optimizer sees it; `decay` is
// false for norm weights. AdamW, Lion and SGD also take a run of many tensors
// of one flat buffer in one call: `undecayed` then lists, sorted and
// disjoint, the elements that take no weight decay (norm weights, biases) where
// the rest follow `decay`. The others take one tensor per call.
struct ParamTensor {
    std::int64_t n = 0;
    void* param = nullptr;  // (n) the weights updated: fp32 master (fp32, mixed) or bf16 (pure bf16)
    DType param_dtype = DType::f32;
    const void* grad = nullptr;  // (n)
    DType grad_dtype = DType::f32;
    float grad_scale = 1.0f;  // multiplies each gradient first: clip coefficient / loss scale
    // Optional, in the backend's memory: multiplies each gradient too (Backend::gradient_multiplier's
    // output), so the update needs no read of the norm by the host first.
    const float* grad_multiplier = nullptr;
    void* param_copy =
        nullptr;  // (n) optional: also receives the new weights rounded to copy_dtype (mixed precision model weights)
    DType copy_dtype = DType::bf16;
    bool decay = true;                        // apply weight decay (matrices) or not (norm weights)
    const ElementRange* undecayed = nullptr;  // host memory, undecayed_count ranges
    std::int64_t undecayed_count = 0;
};

// PyTorch AdamW: p *= 1 - lr*wd; m, v moving averages; bias-corrected step.
struct AdamWParams {
    float lr = 1e-4f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, weight_decay = 0.0f;
    std::int64_t step = 1;  // 1 for the first update
    // Optional, in the backend's memory: the step, read when the update runs in
    // place of `step`, so an update recorded into a graph (OpGraph) replays with
    // the count of the step it runs at (adamw_update, adam8bit_update).
    const std::int32_t* device_step = nullptr;
};

// Chen et al. 2023: p *= 1 - lr*wd; p -= lr*sign(b1*m + (1-b1)*g); m = b2*m + (1-b2)*g.
struct LionParams {
    float lr = 1e-4f, beta1 = 0.9f, beta2 = 0.99f, weight_decay = 0.0f;
};

// 8-bit Adam (bitsandbytes): m (signed map) and v (unsigned map) as uint8
// codes with one fp32 absmax per block of block_size elements. Tensors
// below 4096 elements keep fp32 state: the trainer calls adamw for them.
struct Adam8bitParams {
    AdamWParams adam;
    std::int64_t block_size = 256;
};

// transformers.optimization.Adafactor (beta1 = None): factored second moment
// for matrices (row and column statistics), full for vectors, update
// clipping, relative step size scaled by RMS(p) unless relative_step is false.
struct AdafactorParams {
    float lr = 1e-3f;  // used when relative_step is false
    float eps1 = 1e-30f, eps2 = 1e-3f, clip_threshold = 1.0f, decay_rate = -0.8f, weight_decay = 0.0f;
    bool relative_step = true, scale_parameter = true;
    std::int64_t step = 1;
};

// The elements [begin, begin + p.n) of a (rows, cols) tensor, row-major, that
// one rank updates (its ZeRO shard's part of the tensor); p points at them.
// Matrices (rows > 1): row_stat (rows) and col_stat (cols) are the whole
// factored statistics, replicated on every rank. Vectors: row_stat points at
// the piece's own (p.n) statistics.
struct AdafactorPiece {
    ParamTensor p;
    std::int64_t begin = 0;
    std::int64_t rows = 1, cols = 0;
    void* row_stat = nullptr;
    void* col_stat = nullptr;
    DType state = DType::f32;
    bool factored() const { return rows > 1 && cols > 1; }
};

// LOMO's fused update, plain SGD: p = p*(1 - lr*wd) - lr*g.
struct SgdParams {
    float lr = 1e-4f, weight_decay = 0.0f;
};

// -------------------------------------------------------------- graphs ----

// A sequence of a backend's ops recorded once and replayed as one launch: a
// CUDA graph on a GPU, where launching each op costs microseconds of the
// host's time. Recording runs nothing. The ops are replayed with the
// arguments they were recorded with (the same buffers and scalars), so their
// plans must exist before (a GEMM's first call of a shape times its
// algorithms) and nothing among them may wait for the device or allocate.
class OpGraph {
public:
    virtual ~OpGraph() = default;
    virtual void replay() = 0;
};

// Work queued beside the compute stream (Backend::beside). wait() makes the
// compute stream's later work wait until it is done: call it before freeing
// or rewriting what the work reads or writes. The host reads its results only
// after Backend::synchronize().
class SideWork {
public:
    virtual ~SideWork() = default;
    virtual void wait() = 0;
};

// ------------------------------------------------------------- backend ----

class Backend {
public:
    virtual ~Backend() = default;
    virtual std::string_view name() const = 0;  // "cpu", "cuda:0"

    // ---- memory: raw device buffers; train/memory/memory wraps these with tags.
    // allocate raises tune::OutOfMemoryError (requested, bytes this backend
    // holds) when the device cannot satisfy it; buffers are 256-byte aligned.
    virtual void* allocate(std::uint64_t bytes) = 0;
    virtual void deallocate(void* ptr, std::uint64_t bytes) noexcept = 0;
    virtual std::uint64_t live_bytes() const = 0;
    // The pages large buffers may be taken from instead of allocate(), for a
    // caller that keeps them by its own rule (train/memory/page_pool); nullptr:
    // allocate() only. The backend keeps ownership.
    virtual PageMapper* page_mapper() { return nullptr; }
    // `ops` (calls of this backend's ops) as a graph; where there are no graphs (the CPU), a
    // replay calls `ops` again.
    virtual std::unique_ptr<OpGraph> record(std::function<void()> ops);
    // Whether record() captures the device's work only, so that what `ops` does on the host
    // (bookkeeping, allocation) happens once, at recording, and not at a replay. Not the CPU's.
    virtual bool records_device_work() const { return false; }
    // Gives the memory the backend's pool keeps for reuse back to the device, after waiting for it:
    // before a buffer as large as what was freed, which the kept pieces may not hold in one range.
    virtual void trim_memory() {}
    // `ops` (this backend's copy and add only: nothing that allocates or waits) on a side stream, after
    // everything the compute stream holds so far and beside what it is given next, so that copies over
    // the host link overlap compute (offload's gradient slices). Where there is one stream (the CPU),
    // the ops run now and wait() has nothing to wait for.
    virtual std::unique_ptr<SideWork> beside(std::function<void()> ops);
    // Host memory for offload's states (core/offload_plan.h): the CPU and
    // copy() reach it, and so do this backend's kernels (pinned and mapped
    // into the device's address space on a GPU; plain memory where device
    // memory is the host's). Raises OutOfMemoryError when none is left.
    virtual void* allocate_host(std::uint64_t bytes) { return allocate(bytes); }
    virtual void deallocate_host(void* ptr, std::uint64_t bytes) noexcept { deallocate(ptr, bytes); }
    virtual void copy_to_device(void* dst, const void* host_src, std::uint64_t bytes) = 0;
    virtual void copy_to_host(void* host_dst, const void* src, std::uint64_t bytes) = 0;
    // Device to device; either side may also be allocate_host() memory.
    virtual void copy(void* dst, const void* src, std::uint64_t bytes) = 0;
    virtual void fill_zero(void* dst, std::uint64_t bytes) = 0;
    virtual void synchronize() = 0;
    // Bytes of the largest cache one worker keeps for itself (a CPU core's
    // level 2), which the probes displace before timing an op; 0: not known
    // (the probes then time ops on whatever the caches hold).
    virtual std::uint64_t private_cache_bytes() const { return 0; }

    // ---- GEMM
    virtual std::uint64_t gemm_workspace_bytes(const GemmArgs& args) const = 0;
    virtual void gemm(const GemmArgs& args, Workspace ws) = 0;

    // ---- embedding
    // out (N, C) = table (V, C) rows at tokens (N); tokens outside [0, range.total()) are an error. A
    // vocabulary-parallel shard's table holds tokens [range.begin, range.begin + V): another shard's
    // token gives a zero row (forward) and no gradient (backward).
    virtual void embedding_forward(void* out, const std::int32_t* tokens, const void* table, std::int64_t n,
                                   std::int64_t c, std::int64_t vocab, DType dtype, VocabRange range) = 0;
    virtual std::uint64_t embedding_backward_workspace_bytes(std::int64_t n, std::int64_t c, std::int64_t vocab,
                                                             DType dtype) const = 0;
    // dtable (V, C) accumulates dout (N, C) rows at tokens (N).
    virtual void embedding_backward(void* dtable, const std::int32_t* tokens, const void* dout, std::int64_t n,
                                    std::int64_t c, std::int64_t vocab, DType dtype, Workspace ws,
                                    VocabRange range) = 0;

    // ---- RMSNorm (Llama: x * rsqrt(mean(x^2) + eps) * weight)
    // out (N, C), rstd (N) fp32 kept for backward, x (N, C), weight (C).
    virtual void rmsnorm_forward(void* out, float* rstd, const void* x, const void* weight, std::int64_t n,
                                 std::int64_t c, float eps, DType dtype) = 0;
    // dx (N, C) overwritten, or accumulated when accumulate_dx (the residual
    // stream's gradient); dweight (C) accumulates.
    virtual void rmsnorm_backward(void* dx, void* dweight, const void* dout, const void* x, const void* weight,
                                  const float* rstd, std::int64_t n, std::int64_t c, bool accumulate_dx,
                                  DType dtype) = 0;

    // ---- RoPE, rotate-half as Hugging Face LlamaRotaryEmbedding: position s
    // = token index in its sequence, angle s * inv_freq(i) for pair (i, i + D/2),
    // inv_freq from theta and rope_scaling (kernels/math/rope.h).
    // out, in (B, S, heads, D) with row strides (elements per token); in place allowed.
    // Backward rotates by the opposite angle: din from dout, same layout.
    virtual void rope_forward(void* out, std::int64_t out_stride, const void* in, std::int64_t in_stride,
                              std::int64_t batch, std::int64_t seq, std::int64_t heads, std::int64_t head_dim,
                              const math::RopeFrequencies& freq, DType dtype) = 0;
    virtual void rope_backward(void* din, std::int64_t din_stride, const void* dout, std::int64_t dout_stride,
                               std::int64_t batch, std::int64_t seq, std::int64_t heads, std::int64_t head_dim,
                               const math::RopeFrequencies& freq, DType dtype) = 0;

    // ---- attention (one workspace size serves forward and backward; it
    // holds the backend's scratch: score gradients, staging).
    virtual std::uint64_t attention_workspace_bytes(const AttentionShape& shape, AttentionKind kind,
                                                    DType dtype) const = 0;
    virtual void attention_forward(const AttentionForwardArgs& args, Workspace ws) = 0;
    virtual void attention_backward(const AttentionBackwardArgs& args, Workspace ws) = 0;

    // ---- SwiGLU: out = silu(gate) * up. gate, up and their gradients are
    // (N, F) with row stride in_stride (so they can be halves of one fused
    // gate|up GEMM output); out and dout are (N, F) contiguous. dup may alias
    // dout when in_stride == F.
    virtual void swiglu_forward(void* out, const void* gate, const void* up, std::int64_t n, std::int64_t f,
                                std::int64_t in_stride, DType dtype) = 0;
    virtual void swiglu_backward(void* dgate, void* dup, const void* dout, const void* gate, const void* up,
                                 std::int64_t n, std::int64_t f, std::int64_t in_stride, DType dtype) = 0;

    // ---- element-wise over n elements
    // out = a + b (the residual); out may alias a or b.
    virtual void add(void* out, const void* a, const void* b, std::int64_t n, DType dtype) = 0;
    // x *= s.
    virtual void scale(void* x, std::int64_t n, float s, DType dtype) = 0;
    // dst = src converted (round to nearest even; f32, bf16, f16 in any direction).
    virtual void cast(void* dst, DType dst_dtype, const void* src, DType src_dtype, std::int64_t n) = 0;
    // x *= s; *found_inf is set to 1 when any element of x (before scaling)
    // is inf or nan, and left alone otherwise (zero it once per step).
    // s == 1 only checks (x is not written).
    virtual void unscale(void* x, std::int64_t n, float s, float* found_inf, DType dtype) = 0;
    // *sum += sum of x^2 (a partial square norm: sum shards, then sqrt).
    virtual void sum_squares(float* sum, const void* x, std::int64_t n, DType dtype) = 0;
    // *out = math::gradient_multiplier(sums[0] - sums[1] (count 2; sums[0] for 1), max_norm, loss_scale):
    // the clip coefficient over the loss scale, found where the sums are, for ParamTensor::grad_multiplier.
    virtual void gradient_multiplier(float* out, const float* sums, std::int64_t count, float max_norm,
                                     float loss_scale) = 0;
    // NEFTune: x += scale * u with u uniform in [-1, 1) drawn by element index
    // from a counter-based generator seeded by `seed`, identical on every backend.
    // scale = alpha / sqrt(S * C).
    virtual void neftune_noise(void* x, std::int64_t n, float scale, std::uint64_t seed, DType dtype) = 0;

    // ---- cross-entropy
    virtual void cross_entropy(const CrossEntropyArgs& args) = 0;

    // ---- optimizers, one tensor per call (AdamW, Lion and SGD: or a run of
    // tensors, ParamTensor::undecayed); states are (n) in state_dtype (f32, or
    // bf16 in pure bf16) unless said otherwise.
    virtual void adamw_update(const ParamTensor& p, void* m, void* v, DType state_dtype, const AdamWParams& hp) = 0;
    virtual void lion_update(const ParamTensor& p, void* m, DType state_dtype, const LionParams& hp) = 0;
    // m_codes, v_codes (n) uint8; absmax_m, absmax_v (ceil(n / block_size)) fp32.
    virtual void adam8bit_update(const ParamTensor& p, std::uint8_t* m_codes, std::uint8_t* v_codes, float* absmax_m,
                                 float* absmax_v, const Adam8bitParams& hp) = 0;
    // Matrix (rows, cols) with rows > 1 and cols > 1: row_stat (rows) and
    // col_stat (cols) are the factored second moment; otherwise (a vector,
    // rows*cols = n) row_stat is the full (n) second moment and col_stat unused.
    virtual void adafactor_update(const ParamTensor& p, std::int64_t rows, std::int64_t cols, void* row_stat,
                                  void* col_stat, DType state_dtype, const AdafactorParams& hp) = 0;
    virtual void sgd_update(const ParamTensor& p, const SgdParams& hp) = 0;

    // ---- Adafactor over the piece of a tensor one ZeRO rank owns, in three
    // calls with a sum over ranks (the caller's all-reduce) after the first
    // two. The fp32 sums are device buffers the caller zeroes. One rank with
    // the whole tensor as its piece computes what adafactor_update does.
    // 1. param_sq += sum of p^2 over the piece; matrices: row_sums (rows) and
    //    col_sums (cols) += sums of g^2 + eps1 over the piece's elements.
    virtual void adafactor_partial_sums(const AdafactorPiece& piece, float* param_sq, float* row_sums, float* col_sums,
                                        const AdafactorParams& hp) = 0;
    // 2. With the sums complete: matrices update their whole (replicated)
    //    statistics from row_sums, col_sums and write the mean row statistic
    //    to row_mean; vectors update the piece's own statistics. Then
    //    update_sq += sum of the unclipped update^2 over the piece.
    virtual void adafactor_statistics(const AdafactorPiece& piece, const float* row_sums, const float* col_sums,
                                      float* row_mean, float* update_sq, const AdafactorParams& hp) = 0;
    // 3. With update_sq complete: the update of the piece (lr from param_sq,
    //    clip divisor from update_sq, both over the whole tensor's rows*cols).
    virtual void adafactor_apply(const AdafactorPiece& piece, const float* param_sq, const float* row_mean,
                                 const float* update_sq, const AdafactorParams& hp) = 0;

    // ---- NF4 with double-quantized absmax (QLoRA's frozen base, kernels/math/nf4.h).
    // n a multiple of 64; q holds math::nf4_sizes(n).bytes: packed codes (n/2),
    // absmax codes (n/64) uint8, scales (ceil(n/16384)) fp32 and the offset, at
    // nf4_sizes' offsets. absmax (n/64) fp32 is the caller's scratch.
    virtual void nf4_quantize(void* q, const float* x, std::int64_t n, float* absmax) = 0;
    // out (count) in dtype: weights [begin, begin + count) of the n that q holds
    // (one tensor of a flat buffer: each GEMM dequantizes its own weight).
    virtual void nf4_dequantize(void* out, DType dtype, const void* q, std::int64_t n, std::int64_t begin,
                                std::int64_t count) = 0;
};

// ------------------------------------------------------------- op list ----

// The interface's ops and workspace queries once more, as X(name, parameters):
//  - the self-test's coverage check reads the op names (kBackendOps), so an op
//    without a case fails tests/test_selftest.cpp;
//  - each backend declares its overrides from these lists, so a pure virtual
//    of Backend missing here leaves every backend abstract (a compile error);
//  - the static_asserts below hold each line to Backend's declaration.
// Memory, copies and synchronize() stay out: no self-test case compares them.
// Adding an op: the recipe at the top of kernels/selftest/cases.h.
#define TUNE_BACKEND_OPS(X)                                                                                            \
    X(gemm, (const GemmArgs& args, Workspace ws))                                                                      \
    X(embedding_forward, (void* out, const std::int32_t* tokens, const void* table, std::int64_t n, std::int64_t c,    \
                          std::int64_t vocab, DType dtype, VocabRange range))                                          \
    X(embedding_backward, (void* dtable, const std::int32_t* tokens, const void* dout, std::int64_t n, std::int64_t c, \
                           std::int64_t vocab, DType dtype, Workspace ws, VocabRange range))                           \
    X(rmsnorm_forward, (void* out, float* rstd, const void* x, const void* weight, std::int64_t n, std::int64_t c,     \
                        float eps, DType dtype))                                                                       \
    X(rmsnorm_backward, (void* dx, void* dweight, const void* dout, const void* x, const void* weight,                 \
                         const float* rstd, std::int64_t n, std::int64_t c, bool accumulate_dx, DType dtype))          \
    X(rope_forward,                                                                                                    \
      (void* out, std::int64_t out_stride, const void* in, std::int64_t in_stride, std::int64_t batch,                 \
       std::int64_t seq, std::int64_t heads, std::int64_t head_dim, const math::RopeFrequencies& freq, DType dtype))   \
    X(rope_backward,                                                                                                   \
      (void* din, std::int64_t din_stride, const void* dout, std::int64_t dout_stride, std::int64_t batch,             \
       std::int64_t seq, std::int64_t heads, std::int64_t head_dim, const math::RopeFrequencies& freq, DType dtype))   \
    X(attention_forward, (const AttentionForwardArgs& args, Workspace ws))                                             \
    X(attention_backward, (const AttentionBackwardArgs& args, Workspace ws))                                           \
    X(swiglu_forward, (void* out, const void* gate, const void* up, std::int64_t n, std::int64_t f,                    \
                       std::int64_t in_stride, DType dtype))                                                           \
    X(swiglu_backward, (void* dgate, void* dup, const void* dout, const void* gate, const void* up, std::int64_t n,    \
                        std::int64_t f, std::int64_t in_stride, DType dtype))                                          \
    X(add, (void* out, const void* a, const void* b, std::int64_t n, DType dtype))                                     \
    X(scale, (void* x, std::int64_t n, float s, DType dtype))                                                          \
    X(cast, (void* dst, DType dst_dtype, const void* src, DType src_dtype, std::int64_t n))                            \
    X(unscale, (void* x, std::int64_t n, float s, float* found_inf, DType dtype))                                      \
    X(sum_squares, (float* sum, const void* x, std::int64_t n, DType dtype))                                           \
    X(gradient_multiplier, (float* out, const float* sums, std::int64_t count, float max_norm, float loss_scale))      \
    X(neftune_noise, (void* x, std::int64_t n, float scale, std::uint64_t seed, DType dtype))                          \
    X(cross_entropy, (const CrossEntropyArgs& args))                                                                   \
    X(adamw_update, (const ParamTensor& p, void* m, void* v, DType state_dtype, const AdamWParams& hp))                \
    X(lion_update, (const ParamTensor& p, void* m, DType state_dtype, const LionParams& hp))                           \
    X(adam8bit_update, (const ParamTensor& p, std::uint8_t* m_codes, std::uint8_t* v_codes, float* absmax_m,           \
                        float* absmax_v, const Adam8bitParams& hp))                                                    \
    X(adafactor_update, (const ParamTensor& p, std::int64_t rows, std::int64_t cols, void* row_stat, void* col_stat,   \
                         DType state_dtype, const AdafactorParams& hp))                                                \
    X(sgd_update, (const ParamTensor& p, const SgdParams& hp))                                                         \
    X(adafactor_partial_sums,                                                                                          \
      (const AdafactorPiece& piece, float* param_sq, float* row_sums, float* col_sums, const AdafactorParams& hp))     \
    X(adafactor_statistics, (const AdafactorPiece& piece, const float* row_sums, const float* col_sums,                \
                             float* row_mean, float* update_sq, const AdafactorParams& hp))                            \
    X(adafactor_apply, (const AdafactorPiece& piece, const float* param_sq, const float* row_mean,                     \
                        const float* update_sq, const AdafactorParams& hp))                                            \
    X(nf4_quantize, (void* q, const float* x, std::int64_t n, float* absmax))                                          \
    X(nf4_dequantize, (void* out, DType dtype, const void* q, std::int64_t n, std::int64_t begin, std::int64_t count))

// The workspace queries, each const and returning bytes.
#define TUNE_BACKEND_WORKSPACE_QUERIES(X)                                                                    \
    X(gemm_workspace_bytes, (const GemmArgs& args))                                                          \
    X(embedding_backward_workspace_bytes, (std::int64_t n, std::int64_t c, std::int64_t vocab, DType dtype)) \
    X(attention_workspace_bytes, (const AttentionShape& shape, AttentionKind kind, DType dtype))

// In a backend class: TUNE_BACKEND_OPS(TUNE_OVERRIDE_OP) declares every op.
#define TUNE_OVERRIDE_OP(name, params) void name params override;
#define TUNE_OVERRIDE_WORKSPACE_QUERY(name, params) std::uint64_t name params const override;

#define TUNE_CHECK_OP(name, params)                                                  \
    static_assert(std::is_same_v<decltype(&Backend::name), void(Backend::*) params>, \
                  "TUNE_BACKEND_OPS: " #name " differs from Backend::" #name);
#define TUNE_CHECK_WORKSPACE_QUERY(name, params)                                                    \
    static_assert(std::is_same_v<decltype(&Backend::name), std::uint64_t(Backend::*) params const>, \
                  "TUNE_BACKEND_WORKSPACE_QUERIES: " #name " differs from Backend::" #name);
TUNE_BACKEND_OPS(TUNE_CHECK_OP)
TUNE_BACKEND_WORKSPACE_QUERIES(TUNE_CHECK_WORKSPACE_QUERY)
#undef TUNE_CHECK_OP
#undef TUNE_CHECK_WORKSPACE_QUERY

// The op names, in the list's order ("gemm", "embedding_forward", ...).
#define TUNE_OP_NAME(name, params) std::string_view(#name),
inline constexpr std::string_view kBackendOps[] = {TUNE_BACKEND_OPS(TUNE_OP_NAME)};
#undef TUNE_OP_NAME

}  // namespace tune::kernels
