// The persistent model buffers of one rank (docs/memory-model.md §2): the
// weights in the trial's storage dtype, fp32 master weights in mixed
// precision, and the gradient buffer (also the accumulation buffer), each
// as L + 1 flat buffers laid out by ParamLayout.
#pragma once

#include <cstdint>
#include <vector>

#include "core/config.h"
#include "core/offload_plan.h"
#include "core/zero_plan.h"
#include "kernels/backend.h"
#include "train/comm/comm.h"
#include "train/grad_targets.h"
#include "train/memory/memory.h"
#include "train/param_layout.h"

namespace tune::train {

// The dtypes a precision setting means.
struct PrecisionPlan {
    kernels::DType weights = kernels::DType::f32;  // also gradients and activations
    kernels::DType state = kernels::DType::f32;    // optimizer states
    bool master = false;                           // fp32 master weights beside 16-bit weights
    bool loss_scaling = false;                     // fp16 dynamic loss scaling
};
PrecisionPlan precision_plan(Precision p);

// Where offload keeps its buffers (core/offload_plan.h): host memory from
// `memory`, which the CPU reads and writes through `backend` (the trainer's
// host backend: the CPU backend, also beside a GPU). Without a plan, none.
struct HostPlacement {
    Allocator* memory = nullptr;
    kernels::Backend* backend = nullptr;
    OffloadPlan plan;
    bool holds(Component c) const { return plan.on_host(c); }
};

// Host copies of every flat buffer in fp32 (padding included, zero), used to
// initialise, load and inspect the model.
using HostParams = std::vector<std::vector<float>>;

class ModelState {
public:
    // with_grads: false for LOMO, which keeps no gradient buffer. `zero`
    // says which of master weights, gradients and weights are sharded: rank
    // comm.rank() keeps the layout.flat(i).shard elements from owned_begin(i).
    // host: where offload's buffers live and who touches them on the CPU.
    ModelState(kernels::Backend& backend, Allocator& memory, const ParamLayout& layout, PrecisionPlan plan,
               bool with_grads, ZeroPlan zero, Comm& comm, HostPlacement host = {});

    const ParamLayout& layout() const { return layout_; }
    const PrecisionPlan& plan() const { return plan_; }
    void* weights(std::size_t buffer) const { return params_[buffer].get(); }
    void* master(std::size_t buffer) const { return master_.empty() ? nullptr : master_[buffer].get(); }
    void* grads(std::size_t buffer) const { return grads_.empty() ? nullptr : grads_[buffer].get(); }
    bool has_grads() const { return !grads_.empty(); }
    // The backend that reaches a component's buffers from the CPU side: the
    // host backend for what offload keeps on the host, else the device's.
    kernels::Backend& backend_of(Component c) const { return host_.holds(c) ? *host_.backend : backend_; }
    const HostPlacement& host() const { return host_; }
    const ZeroPlan& zero() const { return zero_; }
    // Elements each kind of buffer `buffer` holds on this rank.
    std::int64_t weights_length(std::size_t buffer) const;
    std::int64_t master_length(std::size_t buffer) const;
    std::int64_t grads_length(std::size_t buffer) const;
    // The first element of buffer `buffer` this rank updates, and how many:
    // the whole padded buffer at stage 0, the rank's shard from stage 1.
    std::int64_t owned_begin(std::size_t buffer) const;
    std::int64_t owned_length(std::size_t buffer) const;
    // Element `e` of flat buffer `buffer` (a whole-buffer index) in this
    // rank's copy; e must be held (owned, unless that buffer is full).
    void* weight_at(std::size_t buffer, std::int64_t e) const;
    void* master_at(std::size_t buffer, std::int64_t e) const;
    void* grad_at(std::size_t buffer, std::int64_t e) const;
    // Tensor `t` of buffer `buffer` inside the full weight or gradient buffer.
    void* weight_tensor(std::size_t buffer, std::size_t t) const;
    void* grad_tensor(std::size_t buffer, std::size_t t) const;

    // The whole gradient buffers as the step's accumulation buffer, never zeroed
    // ahead (train/grad_targets.h): forget_grads() marks every tensor
    // unwritten, so its first writer of the step overwrites it (grad_target's
    // fresh) or zeroes it first (zeroed_grad); settle_grads() zeroes what no op
    // wrote, before anything reads them.
    void forget_grads();
    GradTarget grad_target(std::size_t buffer, std::size_t t);
    void* zeroed_grad(std::size_t buffer, std::size_t t);
    void settle_grads();
    // Which tensors are still unwritten: a replayed micro-batch (train/micro_batch_graphs.h) writes
    // what its recording wrote, and takes the marks its recording left.
    const UnwrittenTensors& unwritten() const { return unwritten_; }
    void set_unwritten(const UnwrittenTensors& marks) { unwritten_ = marks; }
    // Weights (rounded to the storage dtype) and master from the whole
    // buffers; each rank keeps what it holds.
    void upload(const HostParams& host);
    // The same as upload(random_init(layout, seed, stddev)), drawn and uploaded
    // in chunks of a few MiB: the whole model never sits on the host beside
    // its device copy (on a CPU that doubled the process's peak at init).
    // With `source` (tensor parallelism), each tensor takes the whole model's draws at the elements
    // its shard holds, so every split starts from the same model.
    void upload_random(std::uint64_t seed, const LayoutSource* source = nullptr, double stddev = 0.02);
    // Whole buffers as fp32: master when there is one, else the weights; the
    // averaged gradients. Collective when sharded: every rank must call it.
    HostParams download_weights();
    HostParams download_grads();

private:
    // The whole-buffer index of the first of the n elements this rank holds
    // of buffer `buffer`: 0 when it holds them all, else its shard's start.
    std::int64_t first_held(std::size_t buffer, std::int64_t n) const;
    // n elements of `src` (fp32 or 16-bit dt), this rank's shard of the
    // buffer when `sharded`, as the whole buffer's fp32 host values.
    std::vector<float> whole_on_host(std::size_t buffer, const void* src, Component c, kernels::DType dt, bool sharded);

    kernels::Backend& backend_;
    const ParamLayout& layout_;
    PrecisionPlan plan_;
    ZeroPlan zero_;
    Comm& comm_;
    HostPlacement host_;
    std::vector<Buffer> params_, master_, grads_;
    UnwrittenTensors unwritten_;
};

// ZeRO stage 3: the whole padded flat buffer `f` (dtype dt, tag comm) from
// every rank's shard, this rank's at `shard`. Freed with the returned Buffer.
Buffer gather_flat(Allocator& memory, Comm& comm, const void* shard, const FlatLayout& f, kernels::DType dt);

// Host-side rounding to and from 16-bit storage (bf16 or f16 bits).
std::vector<std::uint16_t> round_16(const std::vector<float>& values, kernels::DType dt);
std::vector<float> widen_16(const std::vector<std::uint16_t>& raw, kernels::DType dt);

// Seeded random init as Hugging Face's LlamaPreTrainedModel: matrices
// N(0, 0.02), norm weights 1; padding 0. The generator is counter-based, so
// every platform draws the same weights.
// With `source`, a tensor-parallel rank's shard of the whole model's values (ModelState::upload_random).
HostParams random_init(const ParamLayout& layout, std::uint64_t seed, double stddev = 0.02,
                       const LayoutSource* source = nullptr);

}  // namespace tune::train
