// One rank's training loop: micro-batches of forward (F), LM head and loss
// (H), layer backward (B) and embedding backward (E), then the optimizer step
// (O), allocating exactly what docs/memory-model.md §4 lists, phase by phase.
// Precision, optimizer, accumulation, activation recompute, loss scaling, clipping,
// NEFTune and LOMO are run-time settings of the TrialConfig. Offload keeps its
// states in a second ledger, host memory (pinned beside a GPU), where a host
// backend (the CPU backend) zeroes, sums and updates them; the device's
// kernels add gradient shards into it and read the master from it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/pipeline_schedule.h"
#include "core/pipeline_stages.h"
#include "kernels/backend.h"
#include "kernels/math/loss_scale.h"
#include "train/comm/comm.h"
#include "train/io/data.h"
#include "train/memory/memory.h"
#include "train/micro_batch_graphs.h"
#include "train/model.h"
#include "train/model_state.h"
#include "train/optimizer_state.h"
#include "train/param_layout.h"
#include "train/qlora_base.h"

namespace tune::train {

struct StepStats {
    double loss = 0;       // mean over the step's micro-batches, before the update
    double grad_norm = 0;  // global norm of the (unscaled) gradients; LOMO: when a norm pass ran
    float loss_scale = 1;  // the scale this step ran with (fp16), else 1
    bool skipped = false;  // fp16 overflow: no update
};

// Why this backend cannot run the configuration's offload: beside a GPU the host update writes
// the fp32 master only, so a precision without one (fp32, bf16) offloads on the CPU backend only, and
// so does tensor parallelism, whose group sums gradients in host memory.
std::optional<std::string> offload_unsupported(const kernels::Backend& backend, const TrialConfig& config);

// Why the engine's pipeline cannot run the configuration: it runs the 1f1b schedule (a step's result goes
// out paired with the next step's receive, which interleaving's chunks can leave two neighbours both sending),
// and full or LoRA models (QLoRA's NF4 base is not split by stage). The estimates hold either way.
std::optional<std::string> pipeline_unsupported(const TrialConfig& config);

// Tensor parallelism's view of a gradient LOMO applies as backward makes it: summed over the group where
// each rank computed a part (Trainer::summed_over), and in the norm counted by one rank where every
// rank holds it whole.
struct TensorGroupGrads {
    Comm* group = nullptr;                                       // none: no tensor parallelism
    std::function<Comm*(std::size_t, std::size_t)> summed_over;  // the group to sum a gradient over, or none
    std::function<bool(std::size_t, std::size_t)> counted_elsewhere;
};

class Trainer {
public:
    // init: the weights (fp32, laid out by layout()); random_init(config.seed) when null.
    // adapters (method lora/qlora): the adapters' start, laid out by
    // model().layout(); lora_init(config.seed) when null.
    Trainer(kernels::Backend& backend, Comm& comm, const TrialConfig& config, const TokenSource& tokens,
            const HostParams* init = nullptr, const HostParams* adapters = nullptr);
    ~Trainer();
    Trainer(const Trainer&) = delete;
    Trainer& operator=(const Trainer&) = delete;

    // One optimizer step over grad_accum micro-batches.
    StepStats step();
    // Forward and backward of the next step's micro-batches into the zeroed
    // gradient buffer, without an update (not LOMO). Returns the mean loss.
    double compute_gradients();

    Allocator& memory() { return memory_; }
    const Allocator& memory() const { return memory_; }
    // The host's ledger: what offload keeps in host memory (core/offload_plan.h); empty without.
    const Allocator& host_memory() const { return host_memory_; }
    // The trained state: every weight, or (lora, qlora) the adapters only.
    ModelState& model() { return *model_; }
    // The weights compute reads: the same as model(), or the frozen base.
    ModelState& base() { return base_ ? *base_ : *model_; }
    const ParamLayout& layout() const { return layout_; }
    const Dims& dims() const { return dims_; }
    float loss_scale() const { return scaler_.scale(); }
    std::int64_t applied_steps() const { return applied_; }
    // The micro-batches launched as recorded graphs so far (train/micro_batch_graphs.h), and why
    // none are or recording stopped (nothing while it goes on).
    std::uint64_t micro_batch_graph_launches() const { return graphs_ ? graphs_->launches() : 0; }
    std::optional<std::string> micro_batch_graphs_stopped() const { return graphs_ ? graphs_->stopped() : graph_stop_; }
    // Every micro-batch from now on runs eagerly, for `why`.
    void stop_micro_batch_graphs(std::string why) {
        graphs_.reset();
        graph_stop_ = std::move(why);
    }
    // Bytes the tensor- and data-parallel groups' collectives sent (the world's own count has none of them).
    std::uint64_t group_device_bytes() const;  // the groups' NCCL buffers on the device
    std::uint64_t group_bytes_moved() const;

private:
    class Scalars;
    class StepCounter;
    class MicroBatchIo;
    struct InFlight;
    class Pipeline;
    // A flat buffer's weights as compute reads them: gathered at stage 3 (and freed with this).
    struct Weights {
        Buffer gathered;
        std::unique_ptr<QuantizedLayer> view;  // QLoRA at stage 3: the gathered layer as the model reads it
        const void* ptr = nullptr;
    };
    Weights gather(ModelState& state, std::size_t buffer);
    Weights gather(std::size_t buffer);  // the frozen or trained base's
    // The layer's adapters (gathered at stage 3), or nothing without LoRA.
    Weights gather_adapters(std::size_t layer);
    // Micro-batch k into the sink; returns its mean loss. Its ops (micro_batch_ops) replay as a graph
    // where they can (train/micro_batch_graphs.h).
    double micro_batch(std::uint64_t k, GradSink& sink, float loss_scale);
    void read_window(std::uint64_t k);  // micro-batch k's tokens into the host window
    void micro_batch_ops(std::uint64_t k, GradSink& sink, float loss_scale);
    std::vector<LayerActivations> forward(const Buffer& inputs, std::uint64_t k);
    // x0 (rows, h): the embedding of micro-batch k's inputs.
    Buffer embed(const Buffer& inputs, std::uint64_t k);
    // Layers [first, first + n) forward from acts[0].x; acts[n].x is their output.
    void forward_layers(std::vector<LayerActivations>& acts, std::size_t first, std::size_t n);
    // Their backward: dx from the output's gradient to the input's.
    void backward_layers(std::vector<LayerActivations>& acts, std::size_t first, std::size_t n, Buffer& dx,
                         GradSink& sink);
    void embedding_backward(const Buffer& inputs, const Buffer& dx, GradSink& sink);
    // Pipeline parallelism: this stage's steps of the step's micro-batches in the schedule's order
    // (core/pipeline_schedule.h), activations and their gradients to and from the neighbouring stages.
    // Returns the micro-batches' summed mean losses, the last stage's, on every stage.
    double pipeline_micro_batches(GradSink& sink, float loss_scale);
    Buffer head(LayerActivations& last_out, const Buffer& targets, Buffer& losses, GradSink& sink, float loss_scale);
    // The sums of squares of the gradients this rank owns, reduced over the
    // ranks that share them: [0] the sum, [1] under tensor parallelism the
    // squares another rank counts too. Where they are and how many.
    struct GradientSums {
        Scalars* at = nullptr;
        std::int64_t count = 1;
    };
    GradientSums reduce_gradient_squares();
    // The sums and, `unwatched` (no decision waits on the norm), the gradients' multiplier on the
    // device (scalars_ 2). Without sharding, tensor parallelism or offload these are the same launches
    // on the same buffers every step: recorded once and replayed as one (kernels/backend.h OpGraph).
    GradientSums gradient_sums(bool unwatched, float loss_scale);
    // The next update, each gradient times the device's `multiplier`. Where its launches are the same
    // every step (OptimizerState::replayable) they are recorded once, reading the step count from the device.
    void update_on_device(const float* multiplier);
    static double sum_of(GradientSums sums);
    // Tensor parallelism: f(buffer, tensor, gradient, elements) over each piece of a tensor's gradient this
    // rank owns (ZeRO), for the tensors of the trained layout that pass `which`.
    void for_each_owned(const std::function<bool(std::size_t, std::size_t)>& which,
                        const std::function<void(void*, std::int64_t, Comm*)>& f);
    // How the group holds a trained tensor: split, whole on every rank, or shared by the ranks of one KV head.
    enum class Held : std::uint8_t { split, whole, kv_shared };
    Held held(std::size_t buffer, std::size_t tensor) const;
    bool partial_over_group(std::size_t buffer, std::size_t tensor) const;
    // The group a gradient each of its ranks computed in part is summed over, or null.
    Comm* summed_over(std::size_t buffer, std::size_t tensor) const;
    // Whether another rank counts the tensor's gradient in the norm (a tensor-parallel rank holding a copy of
    // it, the first stage for the last stage's copy of a tied embedding).
    bool counted_elsewhere(std::size_t buffer, std::size_t tensor) const;
    // The last stage's copy of a tied embedding, which the first stage's embedding backward also trains.
    bool tied_copy(std::size_t buffer, std::size_t tensor) const;
    void sum_tied_copies();
    TensorGroupGrads group_grads() const;
    // The vocabulary this rank's embedding and head rows hold: its shard of the padded vocabulary.
    kernels::VocabRange vocab_range() const;
    std::uint32_t tensor_rank() const { return tensor_group_ ? static_cast<std::uint32_t>(tensor_group_->rank()) : 0; }
    ParallelRank parallel_rank() const;
    StepStats optimizer_step(double loss);
    void gather_updated_weights();
    StepStats lomo_step();
    // The clip coefficient over the loss scale, from the sum of squares (kernels/math/grad_clip.h).
    float grad_scale(double sum, float loss_scale) const;
    const void* outer_tensor(const Weights& outer, OuterTensor t) const;

    kernels::Backend& backend_;
    std::unique_ptr<kernels::Backend> own_host_backend_;  // beside a GPU, under offload
    kernels::Backend& host_backend_;                      // the CPU side of offload: backend_ itself on the CPU
    // Tensor parallelism (core/parallel_plan.h): the ranks that split one replica's layers, and the
    // replicas' data-parallel group, which ZeRO, the data and the gradients' reduction use; none at tp 1.
    std::unique_ptr<Comm> tensor_group_;
    std::unique_ptr<Comm> data_group_;
    std::unique_ptr<Comm> kv_group_;  // the tensor-parallel ranks holding one KV head, where they replicate it
    // Pipeline parallelism: one rank of each stage, in stage order; with tied embeddings the first and last
    // stages' ranks, which sum their two copies' gradients. None without.
    std::unique_ptr<Comm> pipe_group_;
    std::unique_ptr<Comm> embed_group_;
    Comm& comm_;  // the data-parallel group: the world without tensor or pipeline parallelism
    TrialConfig config_;
    const TokenSource& tokens_;
    PipelineStage stage_;  // this rank's: every layer without pipeline parallelism
    ParamLayout layout_;
    Dims dims_;
    PrecisionPlan plan_;
    Allocator memory_;
    Allocator host_memory_;
    OffloadPlan offload_;
    std::optional<LoraSpec> lora_;
    std::unique_ptr<ModelState> base_;      // frozen, with LoRA
    std::unique_ptr<QuantizedBase> qbase_;  // frozen NF4, with QLoRA
    std::unique_ptr<ModelState> model_;
    std::unique_ptr<OptimizerState> optimizer_;
    LlamaLayer layer_;
    Buffer workspace_;
    Buffer ones_;  // biases: (T) ones, the left factor of the bias GEMMs
    // Where each trained tensor's shard (the adapters' under LoRA) comes from in the whole model; empty at tp 1.
    LayoutSource tp_source_;
    std::unique_ptr<Scalars> scalars_;
    std::unique_ptr<kernels::OpGraph> sums_graph_;  // gradient_sums' launches, once recorded
    std::unique_ptr<StepCounter> step_count_;       // update_on_device's count, where a graph replays it
    std::unique_ptr<kernels::OpGraph> update_graph_;
    std::unique_ptr<Scalars> host_scalars_;  // on host_backend_
    math::LossScaler scaler_;
    std::uint64_t next_micro_ = 0;  // micro-batches read so far
    std::int64_t applied_ = 0;      // updates applied (bias-correction step)
    std::unique_ptr<MicroBatchIo> io_;
    std::optional<std::string> graph_stop_;     // micro_batch_graphs_off's reason
    std::unique_ptr<MicroBatchGraphs> graphs_;  // last: destroyed first, before the buffers its graphs read
};

}  // namespace tune::train
