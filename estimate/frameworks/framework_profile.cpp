#include "estimate/frameworks/framework_profile.h"

#include <algorithm>

#include "estimate/estimate.h"
#include "estimate/frameworks/eager_ops.h"

namespace tune {

std::optional<FrameworkProfile> parse_framework_profile(std::string_view text) {
    for (std::size_t i = 0; i < kFrameworkProfileNames.size(); ++i)
        if (kFrameworkProfileNames[i] == text) return static_cast<FrameworkProfile>(i);
    return std::nullopt;
}

std::optional<MemoryView> parse_memory_view(std::string_view text) {
    for (std::size_t i = 0; i < kMemoryViewNames.size(); ++i)
        if (kMemoryViewNames[i] == text) return static_cast<MemoryView>(i);
    return std::nullopt;
}

namespace {

bool uses_transformers(FrameworkProfile f) {
    return f == FrameworkProfile::hf_trainer || f == FrameworkProfile::torchrun || f == FrameworkProfile::deepspeed ||
           f == FrameworkProfile::accelerate_fsdp;
}

// The largest phase of our engine's step with the framework's terms added,
// outside the allocator's view (the runtime overhead) left out.
std::uint64_t allocated_peak(const StepMemory& s, const std::vector<FrameworkTerm>& terms) {
    std::int64_t most = 0;
    for (std::size_t p = 0; p < kPhaseCount; ++p) {
        const ComponentBytes& phase = s.phases[p];
        std::int64_t bytes = static_cast<std::int64_t>(phase.total() - phase[Component::overhead]);
        for (const FrameworkTerm& t : terms)
            if (t.alive[p]) bytes += t.bytes;
        most = std::max(most, bytes);
    }
    return static_cast<std::uint64_t>(most);
}

// Our engine's fused element-wise kernels, which only a probed estimate prices
// (StepTime::elementwise_s, less the gradient buckets' adds, which our engine's
// ZeRO makes and the stacks' too); 0 without probes. No profile option changes it.
double fused_elementwise_seconds(const TrialConfig& c, const Hardware& hw, const EstimateOptions& o) {
    if (!o.probed) return 0.0;
    const StepTime engine = step_time(c.model, c, hw, o);
    return std::max(0.0, engine.elementwise_s - engine.bucket_s);
}

// The stack's eager element-wise ops (eager_ops.h) in place of our engine's fused
// kernels; `f` the stack whose rules apply (stack_rules).
std::vector<FrameworkTimeTerm> time_terms(FrameworkProfile f, const TrialConfig& c, const Hardware& hw,
                                          const EstimateOptions& o, double fused) {
    if (f == FrameworkProfile::tune) return {};
    const EagerTraffic traffic = uses_transformers(f)                ? transformers_eager(f, c, o.base_dtype)
                                 : f == FrameworkProfile::torchtitan ? torchtitan_eager(c)
                                                                     : litgpt_eager(c, o.lora_dropout);
    std::vector<FrameworkTimeTerm> terms{
        {"eager element-wise ops through HBM (norms, RoPE, SwiGLU, residuals, casts, the fp32 loss)",
         eager_seconds(traffic, c, hw)}};
    if (fused > 0)
        terms.push_back({"our engine's fused element-wise kernels (probed), which the stack does not run", -fused});
    return terms;
}

}  // namespace

void apply_profile_options(FrameworkProfile f, EstimateOptions& o) {
    // Which stacks hide their collectives behind compute, by ZeRO stage (the stack
    // each stage runs under: stack_rules), taken as wholly hidden:
    // - FSDP (torchtitan's FSDP2, accelerate's, LitGPT's) all-gathers on its unshard
    //   stream ahead of use (BACKWARD_PRE prefetch; FSDP2 always prefetches) and
    //   reduce-scatters on its own stream during backward;
    // - DDP's Reducer (ZeRO-0 under HF Trainer, torchrun and accelerate) all-reduces
    //   each bucket as backward fills it;
    // - DeepSpeed overlaps only at ZeRO-3 (runtime/zero/config.py overlap_comm_valid:
    //   overlap_comm defaults to stage == 3, and tune's ds_config leaves it); below,
    //   its reductions wait for backward (engine.py allreduce_gradients at stage 0).
    using P = FrameworkProfile;
    if (f == P::torchtitan || f == P::accelerate_fsdp || f == P::litgpt) o.comm_overlap = {1.0, 1.0, 1.0, 1.0};
    if (f == P::deepspeed) o.comm_overlap = {0.0, 0.0, 0.0, 1.0};
    if (f == P::hf_trainer || f == P::torchrun) o.comm_overlap = {1.0, 0.0, 0.0, 1.0};
    // Every stack that offloads (DeepSpeed's, FSDP's; framework_validity) overlaps its copies.
    if (f != FrameworkProfile::tune) o.offload_overlap = true;
}

namespace {

// Whether a profile's options price `c`'s step as the sweep's do (its base estimate serves).
bool same_time_model(const EstimateOptions& profile, const EstimateOptions& sweep, const TrialConfig& c) {
    return profile.comm_overlap == sweep.comm_overlap &&
           (c.offload == Offload::none || profile.offload_overlap == sweep.offload_overlap);
}

// The profile's estimate from our engine's, already made with the profile's options,
// its step schedule and its fused element-wise seconds.
FrameworkEstimate estimate_from(FrameworkProfile profile, const TrialConfig& c, const Hardware& hw,
                                const EstimateOptions& o, Estimate engine, const StepMemory& s,
                                double fused_elementwise_s) {
    const FrameworkProfile f = stack_rules(profile, c);
    FrameworkEstimate e;
    e.engine = std::move(engine);
    if (uses_transformers(f)) {
        e.terms = transformers_terms(f, c, o, s);
        e.cached = full_vocab_loss_cached_terms(c, c.model.vocab);
    }
    if (f == FrameworkProfile::deepspeed) {
        for (const FrameworkTerm& t :
             {deepspeed_gradient_term(c), deepspeed_bucket_term(c), deepspeed_offload_device_term(c)})
            if (t.bytes > 0) e.terms.push_back(t);
        for (FrameworkTerm& t : deepspeed_zero3_parameter_terms(c)) e.terms.push_back(std::move(t));
        e.host_terms = deepspeed_host_terms(c);
    }
    if (f == FrameworkProfile::litgpt) e.terms = litgpt_terms(c, o, s);
    if (f == FrameworkProfile::torchtitan) {
        e.terms = torchtitan_terms(c, s);
        e.cached = torchtitan_cached_terms(c);
    }
    if (f == FrameworkProfile::accelerate_fsdp || f == FrameworkProfile::torchtitan) {
        for (FrameworkTerm& t : fsdp_gather_terms(c)) e.terms.push_back(std::move(t));
        for (FrameworkTerm& t : fsdp_gradient_terms(c, f == FrameworkProfile::torchtitan))
            e.terms.push_back(std::move(t));
        // torchtitan's FSDP2 keeps fp32 shards under mixed precision (training.mixed_precision_param).
        const bool fp32_shards =
            f == FrameworkProfile::torchtitan ? has_master_weights(c.precision) : holds_fp32_model(f, c, o.base_dtype);
        for (FrameworkTerm& t : fsdp_offload_cached_terms(c, fp32_shards)) e.cached.push_back(std::move(t));
    }
    for (FrameworkTerm& t : model_dtype_terms(f, c, o.base_dtype)) e.terms.push_back(std::move(t));
    if (FrameworkTerm t = foreach_adamw_term(f, c); t.bytes > 0) e.terms.push_back(std::move(t));
    // The runtime outside the allocator: the CUDA context, cuBLAS and NCCL.
    const std::uint64_t outside = s.at_peak()[Component::overhead];
    e.views[MemoryView::allocated] =
        f == FrameworkProfile::tune ? e.engine.memory.peak - outside : allocated_peak(s, e.terms);
    // The reserved high-water mark never falls below the allocated one.
    e.views[MemoryView::reserved] = e.views[MemoryView::allocated];
    if (!e.cached.empty()) {
        std::vector<FrameworkTerm> held = e.terms;
        held.insert(held.end(), e.cached.begin(), e.cached.end());
        e.views[MemoryView::reserved] = std::max(e.views[MemoryView::reserved], allocated_peak(s, held));
    }
    e.views[MemoryView::device] = e.views[MemoryView::reserved] + outside;
    e.time_terms = time_terms(f, c, hw, o, fused_elementwise_s);
    e.step_s = e.engine.step_s;
    for (const FrameworkTimeTerm& t : e.time_terms) e.step_s += t.seconds;
    const double slower = e.step_s > 0 ? e.engine.step_s / e.step_s : 0.0;
    e.tokens_per_s = e.engine.tokens_per_s * slower;
    e.mfu = e.engine.mfu * slower;
    std::int64_t host = static_cast<std::int64_t>(e.engine.host_memory.peak);
    for (const FrameworkTerm& t : e.host_terms) host += t.bytes;
    e.host = static_cast<std::uint64_t>(std::max<std::int64_t>(host, 0));
    return e;
}

}  // namespace

FrameworkEstimate framework_estimate(FrameworkProfile f, const TrialConfig& c, const Hardware& hw,
                                     const EstimateOptions& options) {
    EstimateOptions o = options;
    apply_profile_options(f, o);
    return estimate_from(f, c, hw, o, estimate(c, hw, o), step_memory(c.model, c, hw, o),
                         fused_elementwise_seconds(c, hw, o));
}

FrameworkPredictions framework_predictions(const TrialConfig& c, const Hardware& hw, const EstimateOptions& options,
                                           std::uint64_t usable) {
    return framework_predictions(c, hw, options, usable, estimate(c, hw, options));
}

FrameworkPredictions framework_predictions(const TrialConfig& c, const Hardware& hw, const EstimateOptions& options,
                                           std::uint64_t usable, const Estimate& base) {
    // One engine estimate and one step schedule serve every profile; a profile
    // that changes the time model (torchtitan's overlap) re-prices the step only.
    const StepMemory s = step_memory(c.model, c, hw, options);
    const double fused = fused_elementwise_seconds(c, hw, options);
    FrameworkPredictions out;
    for (std::size_t i = 1; i < kFrameworkProfileNames.size(); ++i) {
        const auto f = static_cast<FrameworkProfile>(i);
        FrameworkPrediction& p = out[std::string(to_string(f))];
        if (auto problem = framework_problem(f, c)) {
            p.invalid = *problem;
            continue;
        }
        EstimateOptions o = options;
        apply_profile_options(f, o);
        const FrameworkEstimate e =
            estimate_from(f, c, hw, o, same_time_model(o, options, c) ? base : estimate(c, hw, o), s, fused);
        p.allocated = e.views[MemoryView::allocated];
        p.reserved = e.views[MemoryView::reserved];
        p.device = e.views[MemoryView::device];
        p.host = e.host;
        p.step_s = e.step_s;
        p.tokens_per_s = e.tokens_per_s;
        // The node's host memory holds each of its ranks' host memory, as our engine's does.
        const std::optional<std::uint64_t> host = usable_host_bytes(o.host_memory, o.host_margin);
        p.fits = p.device <= usable && (!host || p.host * ranks_per_node(c, o) <= *host);
    }
    return out;
}

}  // namespace tune
