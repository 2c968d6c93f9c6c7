#include "train/trainer.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "core/parallel_plan.h"
#include "core/pipeline_schedule.h"
#include "core/pipeline_stages.h"
#include "core/projection_fusion.h"
#include "core/validity.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/lm_head_loss.h"
#include "kernels/math/grad_clip.h"
#include "kernels/math/neftune.h"

namespace tune::train {

namespace {

using kernels::DType;

std::uint64_t bytes_of(std::int64_t elements, DType dt) {
    return static_cast<std::uint64_t>(elements) * kernels::dtype_bytes(dt);
}

// Rows of logits per chunk of the LM head: at most 2^24 fp32 logits (§4 H).
std::int64_t head_chunk_rows(const Dims& d) {
    return std::min<std::int64_t>(d.T, std::max<std::int64_t>(1, (std::int64_t{1} << 24) / d.V));
}

// Gradients go straight into the persistent gradient buffer (stages 0-1).
class BufferSink final : public GradSink {
public:
    explicit BufferSink(ModelState& model) : model_(model) {}
    void* begin(std::size_t buffer, std::size_t tensor) override { return model_.zeroed_grad(buffer, tensor); }
    GradTarget begin_whole(std::size_t buffer, std::size_t tensor) override {
        return model_.grad_target(buffer, tensor);
    }
    void end(std::size_t, std::size_t) override {}

private:
    ModelState& model_;
};

// ZeRO stages 2-3: a buffer's gradients collect in a bucket of the whole
// flat buffer (tag comm), reduce-scattered when its backward phase ends; the
// rank copies its slice into its gradient shard, the step's first, and adds
// the later ones (micro-batches, the outer buffer's second phase). One sink per step.
// Offload's shards are host memory: the slice crosses the link on the side
// stream (Backend::beside) while the next buffer's backward computes, so the
// bucket lives until the next close (or finish) has waited for its copy, beside
// the next bucket: the estimator counts it so (estimate/estimate_memory.cpp).
class BucketSink final : public GradSink {
public:
    BucketSink(Allocator& memory, ModelState& model, Comm& comm)
        : memory_(memory),
          model_(model),
          comm_(comm),
          started_(model.layout().buffers(), 0),
          to_host_(model.host().holds(Component::grads)) {}
    // Unwinding: the side stream still reads the last bucket, which is freed only after it.
    ~BucketSink() override {
        try {
            finish();
        } catch (const std::exception&) {  // the error that unwinds is the one to report
        }
    }
    BucketSink(const BucketSink&) = delete;
    BucketSink& operator=(const BucketSink&) = delete;
    // Only the padding is zeroed: each tensor's first writer overwrites it (train/grad_targets.h).
    void open(std::size_t buffer) override {
        const FlatLayout& f = model_.layout().flat(buffer);
        bucket_ = memory_.allocate(Component::comm, bytes_of(f.padded, model_.plan().weights));
        zero_padding(memory_.backend(), bucket_.get(), f, model_.plan().weights);
        unwritten_.mark(buffer, f.tensors.size());
    }
    void* begin(std::size_t buffer, std::size_t tensor) override {
        if (unwritten_.take(buffer, tensor))
            zero_tensor(memory_.backend(), bucket_.get(), model_.layout().flat(buffer), tensor, model_.plan().weights);
        return at(buffer, tensor);
    }
    GradTarget begin_whole(std::size_t buffer, std::size_t tensor) override {
        return {at(buffer, tensor), unwritten_.take(buffer, tensor)};
    }
    void end(std::size_t, std::size_t) override {}
    void close(std::size_t buffer) override {
        const FlatLayout& f = model_.layout().flat(buffer);
        const DType dt = model_.plan().weights;
        unwritten_.zero_rest(memory_.backend(), buffer, bucket_.get(), f, dt);
        comm_.reduce_scatter(bucket_.get(), f.padded, dt, ReduceOp::average);
        void* mine = bucket_.at(bytes_of(comm_.rank() * f.shard, dt));
        const auto into_shard = [&, first = std::exchange(started_[buffer], 1) == 0] {
            if (first)
                memory_.backend().copy(model_.grads(buffer), mine, bytes_of(f.shard, dt));
            else
                memory_.backend().add(model_.grads(buffer), model_.grads(buffer), mine, f.shard, dt);
        };
        finish();
        if (!to_host_) {
            into_shard();
            bucket_.reset();
            return;
        }
        copying_ = memory_.backend().beside(into_shard);
        copied_from_ = std::move(bucket_);
    }
    // The last slice's copy is waited for, and its bucket freed.
    void finish() override {
        if (copying_) copying_->wait();
        copying_.reset();
        copied_from_.reset();
    }
    // Zeroes the shards no bucket reached this step (none, where backward ran whole).
    void settle() {
        for (std::size_t b = 0; b < started_.size(); ++b)
            if (started_[b] == 0)
                model_.backend_of(Component::grads)
                    .fill_zero(model_.grads(b), model_.grads_length(b) * dtype_bytes(model_.plan().weights));
    }

private:
    void* at(std::size_t buffer, std::size_t tensor) {
        return bucket_.at(bytes_of(model_.layout().flat(buffer).tensors[tensor].offset, model_.plan().weights));
    }

    Allocator& memory_;
    ModelState& model_;
    Comm& comm_;
    Buffer bucket_;
    UnwrittenTensors unwritten_;
    std::vector<char> started_;                   // per buffer: a slice reached its shard this step
    bool to_host_;                                // the shards are host memory (offload)
    std::unique_ptr<kernels::SideWork> copying_;  // the last slice's copy to the host, on the side stream
    Buffer copied_from_;                          // ... and the bucket it reads
};

// LOMO: each tensor's gradient exists from its first begin() to its end(),
// where it is either applied (SGD) or only measured (the clipping norm pass).
// One tensor at a time, except a tied embedding's, which the LM head begins
// and the embedding backward ends.
class LomoSink final : public GradSink {
public:
    LomoSink(Allocator& memory, ModelState& model, Comm& comm, OptimizerState* apply, float grad_scale,
             float* sum_squares, TensorGroupGrads group = {})
        : memory_(memory),
          model_(model),
          comm_(comm),
          apply_(apply),
          grad_scale_(grad_scale),
          sum_squares_(sum_squares),
          group_(std::move(group)) {}
    void* begin(std::size_t buffer, std::size_t tensor) override {
        Buffer& grad = open_[{buffer, tensor}];
        const std::int64_t n = model_.layout().flat(buffer).tensors[tensor].numel();
        if (!grad) grad = memory_.zeros(Component::grads, bytes_of(n, model_.plan().weights));
        return grad.get();
    }
    void end(std::size_t buffer, std::size_t tensor) override {
        const auto it = open_.find({buffer, tensor});
        const std::int64_t n = model_.layout().flat(buffer).tensors[tensor].numel();
        comm_.all_reduce(it->second.get(), n, model_.plan().weights, ReduceOp::average);
        if (Comm* over = group_.group != nullptr ? group_.summed_over(buffer, tensor) : nullptr)
            over->all_reduce(it->second.get(), n, model_.plan().weights, ReduceOp::sum);
        if (apply_ != nullptr)
            apply_->apply_sgd(buffer, tensor, it->second.get(), grad_scale_);
        else if (group_.group == nullptr || !group_.counted_elsewhere(buffer, tensor))
            memory_.backend().sum_squares(sum_squares_, it->second.get(), n, model_.plan().weights);
        open_.erase(it);
    }
    // Each rank updated the pieces it owns; at stages 1-2 every rank keeps
    // the whole weights, so the buffer's new values are gathered once its
    // backward is done (its weights are not read again in this backward).
    void close(std::size_t buffer) override {
        if (apply_ != nullptr && model_.zero().gathers_weights_after_update())
            comm_.all_gather(model_.weights(buffer), model_.layout().flat(buffer).padded, model_.plan().weights);
    }

private:
    Allocator& memory_;
    ModelState& model_;
    Comm& comm_;
    OptimizerState* apply_;
    float grad_scale_;
    float* sum_squares_;
    TensorGroupGrads group_;
    std::map<std::pair<std::size_t, std::size_t>, Buffer> open_;  // (buffer, tensor) begun and not ended
};

// The vocabulary-parallel head's rows' statistics, combined over the tensor-parallel group.
class GroupCombine final : public kernels::RowCombine {
public:
    explicit GroupCombine(Comm& group) : group_(group) {}
    void max(float* v, std::int64_t n) const override { group_.all_reduce(v, n, DType::f32, ReduceOp::max); }
    void sum(float* v, std::int64_t n) const override { group_.all_reduce(v, n, DType::f32, ReduceOp::sum); }

private:
    Comm& group_;
};

// The groups of the rank's place in the mesh (core/parallel_plan.h: tp innermost, so a tensor group is
// consecutive ranks within a node; pp outermost, so a stage is contiguous ranks): the tensor- and
// pipeline-parallel groups where those are parallel, the data-parallel group where either is (else the
// world is the data-parallel group).
std::unique_ptr<Comm> group_of(Comm& world, const TrialConfig& c, MeshAxis axis) {
    const ParallelPlan plan = parallel_plan(c);
    const bool parallel = axis == MeshAxis::dp ? plan.tp * plan.pp > 1 : plan.size(axis) > 1;
    if (!parallel) return nullptr;
    const GroupSplit s = plan.split({axis}, static_cast<std::uint32_t>(world.rank()));
    return world.split(s.color, s.key);
}

// With tied embeddings under pipeline parallelism the first stage's embedding and the last stage's copy of
// it (its head) are one tensor: the two ranks at the same data- and tensor-parallel place sum their
// gradients (Megatron-Core's embedding group). Every rank takes part in the split; the others keep none.
std::unique_ptr<Comm> embed_group_of(Comm& world, const TrialConfig& c) {
    const ParallelPlan plan = parallel_plan(c);
    if (plan.pp == 1 || !c.model.tied_embeddings || c.adapters()) return nullptr;
    const auto rank = static_cast<std::uint32_t>(world.rank());
    MeshCoordinates at = plan.coordinates(rank);
    const std::uint32_t stage = at[MeshAxis::pp];
    const bool ends = stage == 0 || stage + 1 == plan.pp;
    at[MeshAxis::pp] = 0;
    std::unique_ptr<Comm> group =
        world.split(static_cast<int>(ends ? plan.rank_of(at) : plan.world() + rank), static_cast<int>(stage));
    return ends ? std::move(group) : nullptr;
}

// The rank's pipeline stage (the one stage holding everything without pipeline parallelism).
PipelineStage stage_of(const TrialConfig& c, int rank) {
    const std::vector<PipelineStage> stages = pipeline_stages(c);
    if (stages.size() == 1) return stages.front();
    return stages[parallel_plan(c).coordinates(static_cast<std::uint32_t>(rank))[MeshAxis::pp]];
}

// The rank's flat buffers: its tensor-parallel shard of the model, of its stage's layers and outer tensors.
ParamLayout rank_layout(const TrialConfig& c, const PipelineStage& stage) {
    const ParallelPlan plan = parallel_plan(c);
    if (plan.pp == 1) return make_param_layout(plan.local(c.model), plan.zero_shards(), c.adam8bit_block);
    return make_stage_layout(plan.local(c.model), plan.zero_shards(), c.adam8bit_block, stage);
}

Dims rank_dims(const TrialConfig& c, const ParamLayout& layout) {
    Dims d = make_dims(parallel_plan(c).local(c.model), c.micro_batch, c.context, c.attention);
    d.L = layout.layers;  // the stage's
    return d;
}
// Megatron replicates a KV head over consecutive ranks when tp > kv_heads.
std::unique_ptr<Comm> kv_group_of(Comm* tensor_group, const TrialConfig& c) {
    const auto replicas = static_cast<int>(parallel_plan(c).kv_replicas(c.model));
    if (tensor_group == nullptr || replicas == 1) return nullptr;
    return tensor_group->split(tensor_group->rank() / replicas, tensor_group->rank());
}

}  // namespace

// A few fp32 device scalars (norms) outside the tagged allocator: §5 does not count them.
class Trainer::Scalars {
public:
    explicit Scalars(kernels::Backend& backend) : backend_(backend) {
        ptr_ = static_cast<float*>(backend.allocate(kBytes));
    }
    ~Scalars() { backend_.deallocate(ptr_, kBytes); }
    Scalars(const Scalars&) = delete;
    Scalars& operator=(const Scalars&) = delete;
    float* get() const { return ptr_; }
    void zero() { backend_.fill_zero(ptr_, kBytes); }
    float read(std::int64_t index = 0) {
        float value = 0;
        backend_.copy_to_host(&value, ptr_ + index, sizeof value);
        return value;
    }
    void write(float value, std::int64_t index = 0) { backend_.copy_to_device(ptr_ + index, &value, sizeof value); }

private:
    static constexpr std::uint64_t kBytes = 256;
    kernels::Backend& backend_;
    float* ptr_;
};

// The step count a replayed update reads: the host writes it into pinned
// memory, and the graph's first op copies it to the device. The host writes
// the next count only after reading the step's norm, which waits for the
// previous launch, so the copy never reads a count half-written.
class Trainer::StepCounter {
public:
    explicit StepCounter(kernels::Backend& backend)
        : backend_(backend),
          host_(static_cast<std::int32_t*>(backend.allocate_host(kBytes))),
          device_(static_cast<std::int32_t*>(backend.allocate(kBytes))) {}
    ~StepCounter() {
        backend_.deallocate(device_, kBytes);
        backend_.deallocate_host(host_, kBytes);
    }
    StepCounter(const StepCounter&) = delete;
    StepCounter& operator=(const StepCounter&) = delete;
    void set(std::int64_t step) { *host_ = static_cast<std::int32_t>(step); }
    void copy_to_device() { backend_.copy(device_, host_, kBytes); }
    const std::int32_t* on_device() const { return device_; }

private:
    static constexpr std::uint64_t kBytes = sizeof(std::int32_t);
    kernels::Backend& backend_;
    std::int32_t* host_;
    std::int32_t* device_;
};

// A micro-batch's token window goes to the device, and its losses come back,
// through pinned host memory: a recorded graph's copies read and write it at
// every replay, where pageable memory cannot be captured. The host fills the
// window only after reading the previous micro-batch's losses, which waits
// for everything before.
class Trainer::MicroBatchIo {
public:
    MicroBatchIo(kernels::Backend& backend, std::int64_t tokens)
        : backend_(backend),
          tokens_(tokens),
          window_(static_cast<std::int32_t*>(backend.allocate_host(window_bytes()))),
          losses_(static_cast<float*>(backend.allocate_host(losses_bytes()))) {}
    ~MicroBatchIo() {
        backend_.deallocate_host(losses_, losses_bytes());
        backend_.deallocate_host(window_, window_bytes());
    }
    MicroBatchIo(const MicroBatchIo&) = delete;
    MicroBatchIo& operator=(const MicroBatchIo&) = delete;
    std::int32_t* window() { return window_; }  // (T + 1): the inputs, and from the second on the targets
    void load(void* inputs, void* targets) {
        load_inputs(inputs);
        load_targets(targets);
    }
    void load_inputs(void* inputs) { backend_.copy(inputs, window_, bytes_of(tokens_, DType::i32)); }
    void load_targets(void* targets) { backend_.copy(targets, window_ + 1, bytes_of(tokens_, DType::i32)); }
    void keep(const void* losses) { backend_.copy(losses_, losses, losses_bytes()); }
    double mean_loss() {
        backend_.synchronize();
        double sum = 0;
        for (std::int64_t t = 0; t < tokens_; ++t) sum += losses_[t];
        return sum / static_cast<double>(tokens_);
    }

private:
    std::uint64_t window_bytes() const { return bytes_of(tokens_ + 1, DType::i32); }
    std::uint64_t losses_bytes() const { return bytes_of(tokens_, DType::f32); }
    kernels::Backend& backend_;
    std::int64_t tokens_;
    std::int32_t* window_;
    float* losses_;
};

std::optional<std::string> offload_unsupported(const kernels::Backend& backend, const TrialConfig& config) {
    if (config.offload == Offload::none || backend.name() == "cpu") return std::nullopt;
    if (config.tensor_parallel > 1)
        return fmt::format(
            "offload {} with tensor_parallel {} runs on the CPU backend only (--backend cpu): the tensor-parallel "
            "group sums gradients that live in host memory, which NCCL does not reduce. Its estimate still holds",
            to_string(config.offload), config.tensor_parallel);
    if (precision_plan(config.precision).master) return std::nullopt;
    return fmt::format(
        "offload {} with precision {} runs on the CPU backend only (--backend cpu): on {} the host update "
        "writes an fp32 master, which {} has none of; use bf16-mixed or fp16-mixed. Its estimate still holds",
        to_string(config.offload), to_string(config.precision), backend.name(), to_string(config.precision));
}

std::optional<std::string> pipeline_unsupported(const TrialConfig& c) {
    if (c.pipeline_parallel <= 1) return std::nullopt;
    if (c.pipeline_schedule == PipelineSchedule::interleaved)
        return fmt::format(
            "pipeline_schedule interleaved: the trainer runs pipeline_parallel {} with the 1f1b "
            "schedule; its estimate still holds",
            c.pipeline_parallel);
    if (c.method == Method::qlora)
        return fmt::format(
            "qlora with pipeline_parallel {}: the trainer's stages hold full or LoRA models, not "
            "QLoRA's NF4 base; its estimate still holds",
            c.pipeline_parallel);
    return std::nullopt;
}

namespace {

// The host side of offload: the backend itself where its memory is the host's, else a CPU backend.
std::unique_ptr<kernels::Backend> host_backend_for(const kernels::Backend& backend, const TrialConfig& config) {
    if (config.offload == Offload::none || backend.name() == "cpu") return nullptr;
    return std::make_unique<kernels::CpuBackend>();
}

}  // namespace

Trainer::Trainer(kernels::Backend& backend, Comm& comm, const TrialConfig& config, const TokenSource& tokens,
                 const HostParams* init, const HostParams* adapters)
    : backend_(backend),
      own_host_backend_(host_backend_for(backend, config)),
      host_backend_(own_host_backend_ ? *own_host_backend_ : backend),
      tensor_group_(group_of(comm, config, MeshAxis::tp)),
      data_group_(group_of(comm, config, MeshAxis::dp)),
      kv_group_(kv_group_of(tensor_group_.get(), config)),
      pipe_group_(group_of(comm, config, MeshAxis::pp)),
      embed_group_(embed_group_of(comm, config)),
      comm_(data_group_ ? *data_group_ : comm),
      config_(config),
      tokens_(tokens),
      stage_(stage_of(config, comm.rank())),
      // The rank's shard of the model (core/parallel_plan.h), laid out for ZeRO over the replicas.
      layout_(rank_layout(config, stage_)),
      dims_(rank_dims(config, layout_)),
      plan_(precision_plan(config.precision)),
      memory_(backend, config.memory_limit),
      host_memory_(backend, 0, Placement::host),
      offload_(offload_plan(config.offload)),
      layer_(backend, memory_, dims_, layout_, plan_.weights),
      scaler_(math::LossScalerConfig{static_cast<float>(plan_.loss_scaling ? config.loss_scale_init : 1.0), 2.0f,
                                     static_cast<int>(config.loss_scale_window), 1.0f}) {
    if (auto bad = invalid_reason(config)) throw std::invalid_argument(bad->reason);
    if (comm.world_size() != static_cast<int>(parallel_plan(config).world()))
        throw std::invalid_argument("the trial's world_size differs from the communicator's");
    if (auto why = offload_unsupported(backend, config)) throw std::invalid_argument(*why);
    if (auto why = pipeline_unsupported(config)) throw std::invalid_argument(*why);
    const bool with_grads = config.optimizer != Optimizer::lomo;
    const HostPlacement host{&host_memory_, &host_backend_, offload_};
    if (config.adapters()) {
        // §9: the base frozen in the weights' dtype (no master, no gradients), the adapters trained.
        lora_ = make_lora_spec(config, layout_);
        PrecisionPlan frozen = plan_;
        frozen.master = false;
        if (config.method == Method::qlora)
            qbase_ = std::make_unique<QuantizedBase>(backend, memory_, layout_, plan_.weights,
                                                     zero_plan(config.zero_stage), comm_, host);
        else
            base_ = std::make_unique<ModelState>(backend, memory_, layout_, frozen, false, zero_plan(config.zero_stage),
                                                 comm_, host);
        model_ = std::make_unique<ModelState>(backend, memory_, lora_->layout, plan_, with_grads,
                                              zero_plan(config.zero_stage), comm_, host);
        layer_.set_lora(&*lora_);
    } else {
        model_ = std::make_unique<ModelState>(backend, memory_, layout_, plan_, with_grads,
                                              zero_plan(config.zero_stage), comm_, host);
    }
    const auto alignment = static_cast<std::uint64_t>(layout_.alignment);
    const bool widening = backend.name() == "cpu";  // its 16-bit GEMMs widen their operands into scratch
    layer_.set_fused_projections(fuses_qkv(config, config.model, alignment, widening),
                                 fuses_gate_up(config, config.model, alignment, widening));
    optimizer_ = std::make_unique<OptimizerState>(backend, memory_, comm_, config, *model_);
    // One buffer for every op of the step that takes a workspace (§6): the
    // layers' GEMMs and attention, and the embedding backward.
    const std::uint64_t embedding_ws =
        backend.embedding_backward_workspace_bytes(dims_.T, dims_.h, dims_.V, plan_.weights);
    const std::uint64_t ops_ws = std::max(layer_.workspace_bytes(), embedding_ws);
    // QLoRA (§9): after the ops' scratch (256-aligned), the dequantized weight of the current GEMM.
    const std::uint64_t ops_region = qbase_ ? (ops_ws + 255) / 256 * 256 : ops_ws;
    const std::uint64_t dequantized = qbase_ ? bytes_of(layer_.largest_matrix(), plan_.weights) : 0;
    workspace_ = memory_.allocate(Component::workspace, ops_region + dequantized);
    layer_.set_workspace({workspace_.get(), ops_ws});
    if (qbase_) layer_.set_qlora(workspace_.at(ops_region));
    if (layout_.has(LayerTensor::q_bias) || layout_.has(LayerTensor::o_bias) || layout_.has(LayerTensor::gate_bias)) {
        // The bias GEMMs' left factor (§6): T ones in the weights' dtype.
        ones_ = memory_.allocate(Component::workspace, bytes_of(dims_.T, plan_.weights));
        const std::vector<float> ones(static_cast<std::size_t>(dims_.T), 1.0f);
        if (plan_.weights == DType::f32)
            backend.copy_to_device(ones_.get(), ones.data(), ones_.bytes());
        else
            backend.copy_to_device(ones_.get(), round_16(ones, plan_.weights).data(), ones_.bytes());
        layer_.set_ones(ones_.get());
    }
    LayoutSource base_source;  // where the rank's base shard comes from in the whole model
    if (tensor_group_ || pipe_group_) {
        if (init != nullptr || adapters != nullptr)
            throw std::invalid_argument(fmt::format(
                "{} parallelism starts from random weights and adapters: an initial model or adapter is whole",
                tensor_group_ ? "tensor" : "pipeline"));
        if (tensor_group_) layer_.set_tensor_parallel(tensor_group_.get(), config.sequence_parallel);
        // The rank's tensors as one rank of every layer would hold them, then its stage's of those.
        const ParallelPlan plan = parallel_plan(config);
        const ParamLayout all =
            pipe_group_ ? make_param_layout(plan.local(config.model), plan.zero_shards(), config.adam8bit_block)
                        : layout_;
        const LayoutSource whole =
            tensor_group_ ? tensor_parallel_source(config.model, all, parallel_rank(), config.adam8bit_block)
                          : identity_source(all);
        base_source = pipe_group_ ? stage_source(whole, all, layout_) : whole;
        if (tensor_group_)
            tp_source_ = lora_ ? adapter_parallel_source(config, lora_->layout, parallel_rank()) : base_source;
    }
    const LayoutSource* from_base = base_source.empty() ? nullptr : &base_source;
    scalars_ = std::make_unique<Scalars>(backend);
    io_ = std::make_unique<MicroBatchIo>(backend, dims_.T);
    graph_stop_ = micro_batch_graphs_off(config, backend);
    if (!graph_stop_) graphs_ = std::make_unique<MicroBatchGraphs>(backend, memory_, *model_);
    if (offload_.any()) host_scalars_ = std::make_unique<Scalars>(host_backend_);
    // Random weights are drawn and uploaded in chunks (ModelState::upload_random), so no
    // host copy of the whole model sits beside the device copy at the real peak.
    if (qbase_)
        qbase_->upload(init != nullptr ? *init : random_init(layout_, config.seed, 0.02, from_base));
    else if (init != nullptr)
        base().upload(*init);
    else
        base().upload_random(config.seed, from_base);
    if (lora_)
        model_->upload(adapters != nullptr
                           ? *adapters
                           : lora_init(lora_->layout, config.seed, tensor_group_ ? &tp_source_ : nullptr));
}

Trainer::~Trainer() = default;

const void* Trainer::outer_tensor(const Weights& outer, OuterTensor t) const {
    return static_cast<const unsigned char*>(outer.ptr) + bytes_of(layout_.at(t).offset, plan_.weights);
}

Trainer::Weights Trainer::gather_adapters(std::size_t layer) {
    if (!lora_) return {};
    return gather(*model_, layer);
}

Trainer::Weights Trainer::gather(std::size_t buffer) {
    if (!qbase_) return gather(base(), buffer);
    // QLoRA: layers as a QuantizedLayer, the outer buffer in the weights' dtype; gathered at stage 3.
    Weights w;
    const bool outer = buffer == layout_.outer_index();
    if (!qbase_->sharded()) {
        w.ptr = outer ? qbase_->outer() : static_cast<const void*>(qbase_->layer(buffer));
    } else if (outer) {
        w.gathered = qbase_->gather_outer();
        w.ptr = w.gathered.get();
    } else {
        QuantizedBase::Gathered g = qbase_->gather_layer(buffer);
        w.gathered = std::move(g.storage);
        w.view = std::make_unique<QuantizedLayer>(g.view);
        w.ptr = w.view.get();
    }
    return w;
}

Trainer::Weights Trainer::gather(ModelState& state, std::size_t buffer) {
    Weights w;
    if (!state.zero().gathers_weights_before_use()) {
        w.ptr = state.weights(buffer);
        return w;
    }
    w.gathered = gather_flat(memory_, comm_, state.weights(buffer), state.layout().flat(buffer), plan_.weights);
    w.ptr = w.gathered.get();
    return w;
}

std::vector<LayerActivations> Trainer::forward(const Buffer& inputs, std::uint64_t k) {
    std::vector<LayerActivations> acts(static_cast<std::size_t>(dims_.L) + 1);  // the last holds xL only
    acts[0].x = embed(inputs, k);
    forward_layers(acts, 0, static_cast<std::size_t>(dims_.L));
    return acts;
}

Buffer Trainer::embed(const Buffer& inputs, std::uint64_t k) {
    const Dims& d = dims_;
    Buffer x;
    {
        const Weights outer = gather(layout_.outer_index());
        const std::uint64_t rows_bytes = bytes_of(layer_.rows() * d.h, plan_.weights);
        x = memory_.allocate(Component::activations, rows_bytes);
        // Vocabulary-parallel: each rank looks up its tokens, the others' rows are zero, and the sum over
        // the group is every token's (with sequence parallelism this rank keeps its rows of it).
        Buffer whole =
            layer_.rows() < d.T ? memory_.allocate(Component::comm, bytes_of(d.T * d.h, plan_.weights)) : Buffer{};
        void* lookup = whole ? whole.get() : x.get();
        backend_.embedding_forward(lookup, inputs.as<std::int32_t>(), outer_tensor(outer, OuterTensor::embedding), d.T,
                                   d.h, d.V, plan_.weights, vocab_range());
        // NEFTune's noise does not depend on the embeddings: one rank adds it to the sum the group reduces.
        if (config_.neftune_alpha > 0 && tensor_rank() == 0)
            backend_.neftune_noise(lookup, d.T * d.h,
                                   math::neftune_scale(static_cast<float>(config_.neftune_alpha), static_cast<int>(d.s),
                                                       static_cast<int>(d.h)),
                                   math::splitmix64(config_.seed ^ (k + 1) * 0xd1b54a32d192ed03ull), plan_.weights);
        const void* mine = layer_.reduce_over_group(lookup);
        if (whole) backend_.copy(x.get(), mine, rows_bytes);
    }
    return x;
}

void Trainer::forward_layers(std::vector<LayerActivations>& acts, std::size_t first, std::size_t n) {
    for (std::size_t j = 0; j < n; ++j) {
        const Weights w = gather(first + j);
        const Weights adapters = gather_adapters(first + j);
        Buffer out = memory_.allocate(Component::activations, bytes_of(layer_.rows() * dims_.h, plan_.weights));
        layer_.forward(w.ptr, acts[j], out.get(), adapters.ptr);
        layer_.drop(acts[j], config_.checkpointing);
        acts[j + 1].x = std::move(out);
    }
}

void Trainer::backward_layers(std::vector<LayerActivations>& acts, std::size_t first, std::size_t n, Buffer& dx,
                              GradSink& sink) {
    for (std::size_t j = n; j-- > 0;) {
        const std::size_t i = first + j;
        const Weights w = gather(i);
        const Weights adapters = gather_adapters(i);
        layer_.recompute(w.ptr, acts[j], config_.checkpointing, adapters.ptr);
        sink.open(i);
        layer_.backward(w.ptr, acts[j], dx.get(), sink, i, adapters.ptr);
        sink.close(i);
    }
}

void Trainer::embedding_backward(const Buffer& inputs, const Buffer& dx, GradSink& sink) {
    if (lora_) return;  // the embedding is frozen
    const Dims& d = dims_;
    memory_.set_phase("embed-backward");
    const std::size_t embedding = layout_.index(OuterTensor::embedding);
    sink.open(layout_.outer_index());
    const LlamaLayer::EveryToken dx_all = layer_.every_token(dx.get());
    backend_.embedding_backward(sink.begin(layout_.outer_index(), embedding), inputs.as<std::int32_t>(), dx_all.ptr,
                                d.T, d.h, d.V, plan_.weights, {workspace_.get(), workspace_.bytes()}, vocab_range());
    sink.end(layout_.outer_index(), embedding);
    sink.close(layout_.outer_index());
}

// §4 H: final norm, LM head + loss in chunks, head backward. Returns dX, the
// gradient of the last layer's output; frees xL.
Buffer Trainer::head(LayerActivations& last, const Buffer& targets, Buffer& losses, GradSink& sink, float loss_scale) {
    const Dims& d = dims_;
    const std::size_t outer = layout_.outer_index();
    const Weights w = gather(outer);
    const bool frozen = lora_.has_value();  // the head and final norm get no gradients (§9)
    if (!frozen) sink.open(outer);
    const std::int64_t r = layer_.rows();  // the residual stream's rows on this rank
    Buffer nf = memory_.allocate(Component::activations, bytes_of(r * d.h, plan_.weights));
    Buffer rstd = memory_.allocate(Component::activations, bytes_of(r, DType::f32));
    backend_.rmsnorm_forward(nf.get(), rstd.as<float>(), last.x.get(), outer_tensor(w, OuterTensor::final_norm), r, d.h,
                             d.eps, plan_.weights);
    Buffer dnf = memory_.allocate(Component::activations, bytes_of(r * d.h, plan_.weights));
    // Sequence parallelism: the head reads every token's nf and writes every token's dnf (tag comm).
    LlamaLayer::EveryToken nf_all = layer_.every_token(nf.get());
    Buffer dnf_whole =
        nf_all.gathered ? memory_.allocate(Component::comm, bytes_of(d.T * d.h, plan_.weights)) : Buffer{};
    kernels::LmHeadLossArgs args;
    args.rows = d.T, args.hidden = d.h, args.vocab = d.V, args.chunk_rows = head_chunk_rows(d);
    args.dtype = plan_.weights;
    args.x = nf_all.ptr, args.weight = outer_tensor(w, layout_.head());
    args.targets = targets.as<std::int32_t>(), args.losses = losses.as<float>();
    args.dx = dnf_whole ? dnf_whole.get() : dnf.get();
    args.grad_scale = loss_scale / static_cast<float>(d.T * config_.grad_accum);
    const std::optional<GroupCombine> combine =
        tensor_group_ ? std::optional<GroupCombine>(*tensor_group_) : std::nullopt;
    if (combine) {
        const kernels::VocabRange range = vocab_range();
        args.combine = &*combine, args.vocab_begin = range.begin, args.vocab_total = range.total;
    }
    Buffer logits = memory_.allocate(Component::logits, kernels::lm_head_loss_workspace_bytes(backend_, args));
    // Tied: the head's gradient goes to the embedding's, which the embedding backward completes.
    const bool tied = layout_.head() == OuterTensor::embedding;
    const GradTarget dweight = frozen ? GradTarget{} : sink.begin_whole(outer, layout_.index(layout_.head()));
    args.dweight = dweight.ptr, args.dweight_beta = dweight.beta();
    kernels::lm_head_loss(backend_, args, {logits.get(), logits.bytes()});
    logits.reset();
    if (!frozen && !tied) sink.end(outer, layout_.index(OuterTensor::lm_head));
    // Each vocabulary shard's part of the final norm's output gradient, summed (this rank's rows of it).
    nf_all.gathered.reset();
    const void* dnf_rows = layer_.reduce_over_group(args.dx);
    if (dnf_whole) backend_.copy(dnf.get(), dnf_rows, dnf.bytes());
    dnf_whole.reset();

    Buffer dx = memory_.allocate(Component::activations, bytes_of(r * d.h, plan_.weights));
    // A frozen norm's gradient goes to a throwaway (h): the kernels always accumulate one.
    Buffer norm_sink = frozen ? memory_.allocate(Component::activations, bytes_of(d.h, plan_.weights)) : Buffer{};
    backend_.rmsnorm_backward(
        dx.get(), frozen ? norm_sink.get() : sink.begin(outer, layout_.index(OuterTensor::final_norm)), dnf.get(),
        last.x.get(), outer_tensor(w, OuterTensor::final_norm), rstd.as<float>(), r, d.h, false, plan_.weights);
    norm_sink.reset();
    if (!frozen) sink.end(outer, layout_.index(OuterTensor::final_norm));
    dnf.reset(), nf.reset(), rstd.reset(), last.x.reset();
    if (!frozen) sink.close(outer);
    return dx;
}

void Trainer::read_window(std::uint64_t k) {
    const Dims& d = dims_;
    tokens_.read(window_start(k, static_cast<std::uint64_t>(d.b), static_cast<std::uint64_t>(d.s),
                              static_cast<std::uint64_t>(comm_.rank()), static_cast<std::uint64_t>(comm_.world_size())),
                 io_->window(), d.T + 1);
}

double Trainer::micro_batch(std::uint64_t k, GradSink& sink, float loss_scale) {
    read_window(k);
    const auto ops = [&] { micro_batch_ops(k, sink, loss_scale); };
    if (graphs_)
        graphs_->run(ops);
    else
        ops();
    return io_->mean_loss();
}

void Trainer::micro_batch_ops(std::uint64_t k, GradSink& sink, float loss_scale) {
    const Dims& d = dims_;
    memory_.set_phase("forward");
    Buffer inputs = memory_.allocate(Component::activations, bytes_of(d.T, DType::i32));
    Buffer targets = memory_.allocate(Component::activations, bytes_of(d.T, DType::i32));
    Buffer losses = memory_.allocate(Component::activations, bytes_of(d.T, DType::f32));
    io_->load(inputs.get(), targets.get());

    std::vector<LayerActivations> acts = forward(inputs, k);
    memory_.set_phase("head-backward");
    Buffer dx = head(acts.back(), targets, losses, sink, loss_scale);
    memory_.set_phase("layer-backward");
    backward_layers(acts, 0, static_cast<std::size_t>(d.L), dx, sink);
    embedding_backward(inputs, dx, sink);
    sink.finish();
    io_->keep(losses.get());
}

// A micro-batch's chunk between its forward and its backward on this stage: its layers' activations (the
// last entry holds the head's input on the last virtual stage), on the first virtual stage the inputs the
// embedding's backward reads, on the last the targets and per-token losses.
struct Trainer::InFlight {
    std::vector<LayerActivations> acts;
    Buffer inputs, targets, losses;
};

// The previous step's result (an activation for the next stage, a gradient for the previous one) goes out
// in one batch with the receive the next step needs, as Megatron-Core's send_forward_recv_backward pairs
// them: two neighbours that each send first cannot wait on each other.
class Trainer::Pipeline {
public:
    Pipeline(Comm& group, std::int64_t count, DType dtype) : group_(group), count_(count), dtype_(dtype) {}
    void hold(Buffer result, int to) {
        outgoing_ = std::move(result);
        to_ = to;
    }
    // Sends what is held, receives into `incoming` from `from` where given, and frees what it sent.
    void exchange(Buffer* incoming = nullptr, int from = 0) {
        std::vector<P2POp> ops;
        if (outgoing_) ops.push_back({P2POp::Kind::send, outgoing_.get(), count_, dtype_, to_});
        if (incoming != nullptr) ops.push_back({P2POp::Kind::recv, incoming->get(), count_, dtype_, from});
        if (!ops.empty()) group_.send_recv(ops);
        outgoing_.reset();
    }

private:
    Comm& group_;
    std::int64_t count_;
    DType dtype_;
    Buffer outgoing_;
    int to_ = 0;
};

double Trainer::pipeline_micro_batches(GradSink& sink, float loss_scale) {
    const Dims& d = dims_;
    const ParallelPlan plan = parallel_plan(config_);
    const PipelineTable table =
        pipeline_table(config_.pipeline_schedule, plan.pp, plan.virtual_stages, config_.grad_accum);
    const auto p = static_cast<int>(plan.pp), stage = static_cast<int>(stage_.stage);
    const std::uint32_t last = plan.pp * plan.virtual_stages - 1;  // the virtual stage with the head
    const std::uint64_t boundary = bytes_of(layer_.rows() * d.h, plan_.weights);
    Pipeline pipe(*pipe_group_, layer_.rows() * d.h, plan_.weights);
    std::vector<std::size_t> chunk_begin;  // each chunk's first layer buffer
    for (std::size_t at = 0; std::uint32_t n : stage_.chunk_layers) chunk_begin.push_back(std::exchange(at, at + n));
    std::map<std::pair<std::uint32_t, std::uint32_t>, InFlight> flight;  // by (micro-batch, chunk)
    double loss = 0;
    for (const PipelineStep& s : table.steps[stage_.stage]) {
        const std::uint32_t g = table.virtual_stage(stage_.stage, s.chunk);
        const std::uint64_t k = next_micro_ + s.micro_batch;
        const std::size_t first = chunk_begin[s.chunk], n = stage_.chunk_layers[s.chunk];
        InFlight& f = flight[{s.micro_batch, s.chunk}];
        if (!s.backward) {
            memory_.set_phase("forward");
            f.acts.resize(n + 1);
            if (g == 0 || g == last) read_window(k);
            if (g == 0) {
                f.inputs = memory_.allocate(Component::activations, bytes_of(d.T, DType::i32));
                io_->load_inputs(f.inputs.get());
            }
            if (g == last) {
                f.targets = memory_.allocate(Component::activations, bytes_of(d.T, DType::i32));
                f.losses = memory_.allocate(Component::activations, bytes_of(d.T, DType::f32));
                io_->load_targets(f.targets.get());
            }
            backend_.synchronize();  // the window's copies are done before the next read overwrites it
            if (g == 0) {
                pipe.exchange();
                f.acts[0].x = embed(f.inputs, k);
            } else {
                f.acts[0].x = memory_.allocate(Component::activations, boundary);
                pipe.exchange(&f.acts[0].x, (stage + p - 1) % p);
            }
            forward_layers(f.acts, first, n);
            if (g != last) pipe.hold(std::move(f.acts[n].x), (stage + 1) % p);
            continue;
        }
        Buffer dx;
        if (g == last) {
            pipe.exchange();
            memory_.set_phase("head-backward");
            dx = head(f.acts.back(), f.targets, f.losses, sink, loss_scale);
            io_->keep(f.losses.get());
            loss += io_->mean_loss();
        } else {
            memory_.set_phase("layer-backward");
            dx = memory_.allocate(Component::activations, boundary);
            pipe.exchange(&dx, (stage + 1) % p);
        }
        memory_.set_phase("layer-backward");
        backward_layers(f.acts, first, n, dx, sink);
        if (g == 0)
            embedding_backward(f.inputs, dx, sink);
        else
            pipe.hold(std::move(dx), (stage + p - 1) % p);
        flight.erase({s.micro_batch, s.chunk});
    }
    pipe.exchange();
    sink.finish();
    // The last stage's losses, on every stage.
    scalars_->write(static_cast<float>(loss), 3);
    pipe_group_->all_reduce(scalars_->get() + 3, 1, DType::f32, ReduceOp::sum);
    return scalars_->read(3);
}

kernels::VocabRange Trainer::vocab_range() const {
    if (!tensor_group_) return {};
    return {tensor_rank() * dims_.V, tensor_group_->world_size() * dims_.V};
}

TensorGroupGrads Trainer::group_grads() const {
    if (!tensor_group_) return {};
    return {tensor_group_.get(), [this](std::size_t b, std::size_t t) { return summed_over(b, t); },
            [this](std::size_t b, std::size_t t) { return counted_elsewhere(b, t); }};
}

ParallelRank Trainer::parallel_rank() const {
    const auto replicas = static_cast<std::uint32_t>(parallel_plan(config_).kv_replicas(config_.model));
    return {tensor_rank(), tensor_rank() / replicas};
}

std::uint64_t Trainer::group_device_bytes() const {
    std::uint64_t bytes = 0;
    for (const auto* g : {&tensor_group_, &data_group_, &kv_group_, &pipe_group_, &embed_group_})
        bytes += *g ? (*g)->device_bytes() : 0;
    return bytes;
}

std::uint64_t Trainer::group_bytes_moved() const {
    std::uint64_t bytes = 0;
    for (const auto* g : {&tensor_group_, &data_group_, &kv_group_, &pipe_group_, &embed_group_})
        bytes += *g ? (*g)->bytes_moved() : 0;
    return bytes;
}

Trainer::Held Trainer::held(std::size_t buffer, std::size_t tensor) const {
    if (tp_source_[buffer][tensor].replicated) return Held::whole;
    if (!kv_group_ || buffer == layout_.outer_index()) return Held::split;
    // A KV head's weights, or the adapter B that splits like them (a k or v adapter's A is whole).
    const bool kv = lora_ ? tensor % 2 == 1 && kv_tensor(adapted_tensor(lora_->targets, tensor))
                          : kv_tensor(layout_.layer_tensor(tensor));
    return kv ? Held::kv_shared : Held::split;
}

bool Trainer::counted_elsewhere(std::size_t buffer, std::size_t tensor) const {
    if (tied_copy(buffer, tensor)) return true;
    if (!tensor_group_) return false;
    switch (held(buffer, tensor)) {
        case Held::whole:
            return tensor_rank() != 0;
        case Held::kv_shared:
            return kv_group_->rank() != 0;
        case Held::split:
            return false;
    }
    return false;
}

// A replicated tensor's gradient is each rank's part of a sum over the group where the rank saw part of
// what it applies to: its rows of the sequence (sequence parallelism: every norm), its heads (Qwen3's
// q/k norms, one head_dim weight for every head), or its part of a linear's (LoRA's whole A of a
// column-parallel base meets the rank's rows of B in dA; a row-parallel base's whole B meets x A^T
// over the rank's columns of A in dB). A row-parallel linear's bias sees every token's whole output
// gradient on every rank: its gradient is whole already.
bool Trainer::partial_over_group(std::size_t buffer, std::size_t tensor) const {
    if (lora_) return true;
    if (buffer == layout_.outer_index()) return config_.sequence_parallel;  // the final norm
    const LayerTensor kind = layout_.layer_tensor(tensor);
    if (kind == LayerTensor::o_bias || kind == LayerTensor::down_bias) return false;
    return config_.sequence_parallel || kind == LayerTensor::q_norm || kind == LayerTensor::k_norm;
}

// A KV head's ranks each back-propagate their own query heads into it: its gradients are their sum.
Comm* Trainer::summed_over(std::size_t buffer, std::size_t tensor) const {
    if (!tensor_group_) return nullptr;
    switch (held(buffer, tensor)) {
        case Held::whole:
            return partial_over_group(buffer, tensor) ? tensor_group_.get() : nullptr;
        case Held::kv_shared:
            return kv_group_.get();
        case Held::split:
            return nullptr;
    }
    return nullptr;
}

void Trainer::for_each_owned(const std::function<bool(std::size_t, std::size_t)>& which,
                             const std::function<void(void*, std::int64_t, Comm*)>& f) {
    const ZeroPlan& zero = model_->zero();
    for (std::size_t i = 0; i < model_->layout().buffers(); ++i) {
        const FlatLayout& flat = model_->layout().flat(i);
        // The buffer's elements this rank owns, and where the first of them is in grads(i).
        const bool sharded = zero.updates_own_shard_only();
        const std::int64_t lo = sharded ? comm_.rank() * flat.shard : 0, hi = sharded ? lo + flat.shard : flat.padded;
        const std::int64_t at = zero.shards_gradients ? lo : 0;
        for (std::size_t t = 0; t < flat.tensors.size(); ++t) {
            if (!which(i, t)) continue;
            const TensorView& v = flat.tensors[t];
            const std::int64_t a = std::max(lo, v.offset), b = std::min(hi, v.offset + v.numel());
            if (a < b)
                f(static_cast<unsigned char*>(model_->grads(i)) + bytes_of(a - at, plan_.weights), b - a,
                  summed_over(i, t));
        }
    }
}

// Over the gradients this rank owns, summed where they live (the host's
// under offload), completed by one scalar all-reduce on the device when sharded.
// Tensor parallelism sums over its group too, less the squares of the copies
// another rank of the group counts (counted_elsewhere).
Trainer::GradientSums Trainer::reduce_gradient_squares() {
    const bool on_host = offload_.on_host(Component::grads);
    Scalars& sum = on_host ? *host_scalars_ : *scalars_;
    kernels::Backend& where = model_->backend_of(Component::grads);
    sum.zero();
    const ZeroPlan& zero = model_->zero();
    for (std::size_t i = 0; i < model_->layout().buffers(); ++i) {
        const FlatLayout& f = model_->layout().flat(i);
        const void* owned = model_->grads(i);
        if (zero.owned_gradients_inside_whole_buffer())
            owned = static_cast<const unsigned char*>(owned) + bytes_of(comm_.rank() * f.shard, plan_.weights);
        where.sum_squares(sum.get(), owned, zero.updates_own_shard_only() ? f.shard : f.padded, plan_.weights);
    }
    if (tensor_group_ || embed_group_)
        for_each_owned([this](std::size_t b, std::size_t t) { return counted_elsewhere(b, t); },
                       [&](void* g, std::int64_t n, Comm*) { where.sum_squares(sum.get() + 1, g, n, plan_.weights); });
    if (!tensor_group_ && !pipe_group_ && !zero.updates_own_shard_only()) return {&sum, 1};
    const std::int64_t sums = tensor_group_ || pipe_group_ ? 2 : 1;
    if (on_host)  // the collectives run on the device's copy
        for (std::int64_t k = 0; k < sums; ++k) scalars_->write(sum.read(k), k);
    if (zero.updates_own_shard_only()) comm_.all_reduce(scalars_->get(), sums, DType::f32, ReduceOp::sum);
    if (tensor_group_) tensor_group_->all_reduce(scalars_->get(), 2, DType::f32, ReduceOp::sum);
    if (pipe_group_) pipe_group_->all_reduce(scalars_->get(), 2, DType::f32, ReduceOp::sum);  // every stage's
    return {scalars_.get(), sums};
}

Trainer::GradientSums Trainer::gradient_sums(bool unwatched, float loss_scale) {
    const auto run = [this, unwatched, loss_scale] {
        const GradientSums sums = reduce_gradient_squares();
        if (unwatched)
            backend_.gradient_multiplier(scalars_->get() + 2, sums.at->get(), sums.count,
                                         static_cast<float>(config_.clip), loss_scale);
        return sums;
    };
    const bool same_every_step =
        unwatched && !tensor_group_ && !pipe_group_ && !model_->zero().updates_own_shard_only();
    if (!same_every_step) return run();
    if (!sums_graph_) sums_graph_ = backend_.record([run] { run(); });
    sums_graph_->replay();
    return {scalars_.get(), 1};
}

void Trainer::update_on_device(const float* multiplier) {
    ++applied_;
    if (!optimizer_->replayable()) {
        optimizer_->step({1.0f, multiplier}, {applied_});
        return;
    }
    if (!update_graph_) {  // recording runs nothing: the count is set before the first launch too
        step_count_ = std::make_unique<StepCounter>(backend_);
        update_graph_ = backend_.record([this, multiplier] {
            step_count_->copy_to_device();
            optimizer_->step({1.0f, multiplier}, {.device = step_count_->on_device()});
        });
    }
    step_count_->set(applied_);
    update_graph_->replay();
}

double Trainer::sum_of(GradientSums sums) {
    return sums.count == 1 ? sums.at->read() : static_cast<double>(sums.at->read(0)) - sums.at->read(1);
}

float Trainer::grad_scale(double sum, float loss_scale) const {
    return math::gradient_multiplier(static_cast<float>(sum), static_cast<float>(config_.clip), loss_scale);
}

double Trainer::compute_gradients() {
    if (!model_->has_grads()) throw std::logic_error("compute_gradients: lomo keeps no gradient buffer");
    BufferSink direct(*model_);
    BucketSink buckets(memory_, *model_, comm_);
    const ZeroPlan& zero = model_->zero();
    const bool whole = !zero.reduce_scatters_during_backward();  // the sink writes the whole buffers
    GradSink& sink = whole ? static_cast<GradSink&>(direct) : buckets;
    // Nothing is zeroed ahead (train/grad_targets.h): stages 0-1 write each gradient where a GEMM
    // first produces it, stages 2-3 copy a bucket's first slice into the shard.
    if (whole) model_->forget_grads();
    double loss = 0;
    if (pipe_group_) {
        loss = pipeline_micro_batches(sink, scaler_.scale());
        next_micro_ += config_.grad_accum;
    } else {
        for (std::uint32_t a = 0; a < config_.grad_accum; ++a)
            loss += micro_batch(next_micro_++, sink, scaler_.scale());
    }
    if (whole)
        model_->settle_grads();
    else
        buckets.settle();
    sum_tied_copies();
    // Stage 0 averages every gradient on every rank; stage 1 only the rank's shard.
    for (std::size_t i = 0; i < model_->layout().buffers() && !zero.reduce_scatters_during_backward(); ++i) {
        void* grads = model_->grads(i);
        const std::int64_t n = model_->layout().flat(i).padded;
        if (zero.all_reduces_gradients())
            comm_.all_reduce(grads, n, plan_.weights, ReduceOp::average);
        else
            comm_.reduce_scatter(grads, n, plan_.weights, ReduceOp::average);
    }
    // The gradients each rank of a group computed in part are summed over it (summed_over).
    if (tensor_group_)
        for_each_owned(
            [this](std::size_t b, std::size_t t) { return summed_over(b, t) != nullptr; },
            [&](void* g, std::int64_t n, Comm* group) { group->all_reduce(g, n, plan_.weights, ReduceOp::sum); });
    return loss / config_.grad_accum;
}

bool Trainer::tied_copy(std::size_t buffer, std::size_t tensor) const {
    return embed_group_ && !layout_.has(OuterTensor::embedding) && buffer == layout_.outer_index() &&
           layout_.has(OuterTensor::lm_head) && tensor == layout_.index(OuterTensor::lm_head);
}

// The embedding's two copies hold the sum of their gradients, so their updates keep them equal.
void Trainer::sum_tied_copies() {
    if (!embed_group_ || lora_) return;
    const OuterTensor t = layout_.has(OuterTensor::embedding) ? OuterTensor::embedding : OuterTensor::lm_head;
    const TensorView& v = layout_.at(t);
    void* g = static_cast<unsigned char*>(model_->grads(layout_.outer_index())) + bytes_of(v.offset, plan_.weights);
    embed_group_->all_reduce(g, v.numel(), plan_.weights, ReduceOp::sum);
}

StepStats Trainer::optimizer_step(double loss) {
    StepStats s;
    s.loss = loss;
    s.loss_scale = scaler_.scale();
    memory_.set_phase("optimizer-step");
    // The host reads what the device's kernels added into its gradient shards.
    if (offload_.any()) backend_.synchronize();
    // Without loss scaling (and offload's host update) no decision waits on the
    // norm: the device turns the sums into the gradients' multiplier and the
    // update reads it there, so the host reads the norm only once the update is
    // queued. Non-finite gradients still end the trial, after an update that
    // could not be kept anyway.
    const bool unwatched = !plan_.loss_scaling && !offload_.any();
    const GradientSums sums = gradient_sums(unwatched, s.loss_scale);
    if (unwatched) {
        update_on_device(scalars_->get() + 2);  // the multiplier, beside the two sums
        gather_updated_weights();
    }
    const double sum = sum_of(sums);
    s.grad_norm = std::sqrt(sum) / s.loss_scale;
    const bool overflow = !std::isfinite(sum);
    if (overflow && !plan_.loss_scaling) throw std::runtime_error("non-finite gradients");
    s.skipped = !scaler_.update(overflow && plan_.loss_scaling);
    if (unwatched) return s;
    if (!s.skipped) optimizer_->step({grad_scale(sum, s.loss_scale), nullptr}, {++applied_});
    gather_updated_weights();
    return s;
}

void Trainer::gather_updated_weights() {
    for (std::size_t i = 0; i < model_->layout().buffers() && model_->zero().gathers_weights_after_update(); ++i)
        comm_.all_gather(model_->weights(i), model_->layout().flat(i).padded, plan_.weights);
}

StepStats Trainer::lomo_step() {
    StepStats s;
    s.loss_scale = scaler_.scale();
    const std::uint64_t k = next_micro_++;
    double sum = 0;
    // A first backward finds the global norm when clipping needs it or fp16 may overflow.
    if (config_.clip > 0 || plan_.loss_scaling) {
        scalars_->zero();
        LomoSink measure(memory_, *model_, comm_, nullptr, 1.0f, scalars_->get(), group_grads());
        s.loss = micro_batch(k, measure, s.loss_scale);
        if (tensor_group_) tensor_group_->all_reduce(scalars_->get(), 1, DType::f32, ReduceOp::sum);
        sum = scalars_->read();
        s.grad_norm = std::sqrt(sum) / s.loss_scale;
        const bool overflow = !std::isfinite(sum);
        if (overflow && !plan_.loss_scaling) throw std::runtime_error("non-finite gradients");
        s.skipped = !scaler_.update(overflow && plan_.loss_scaling);
        if (s.skipped) return s;
    }
    LomoSink apply(memory_, *model_, comm_, optimizer_.get(), grad_scale(sum, s.loss_scale), nullptr, group_grads());
    const double loss = micro_batch(k, apply, s.loss_scale);
    if (config_.clip <= 0 && !plan_.loss_scaling) s.loss = loss;
    ++applied_;
    return s;
}

StepStats Trainer::step() {
    if (config_.optimizer == Optimizer::lomo) return lomo_step();
    return optimizer_step(compute_gradients());
}

}  // namespace tune::train
