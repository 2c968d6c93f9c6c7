#include "estimate/estimate.h"

#include <algorithm>

#include "core/parallel_plan.h"
#include "core/pipeline_stages.h"
#include "core/zero_plan.h"
#include "estimate/flat_layout.h"

namespace tune {

std::uint64_t usable_bytes(const TrialConfig& c, const Hardware& hw, const EstimateOptions& o) {
    const std::uint64_t limit = o.memory_limit.value_or(c.memory_limit != 0 ? c.memory_limit : hw.memory_bytes);
    return static_cast<std::uint64_t>(static_cast<double>(limit) * (1.0 - o.margin));
}

std::optional<std::uint64_t> usable_host_bytes(std::optional<std::uint64_t> host_memory, double margin) {
    if (!host_memory) return std::nullopt;
    return static_cast<std::uint64_t>(static_cast<double>(*host_memory) * (1.0 - margin));
}

std::uint64_t limited_bytes(const MemoryBreakdown& m, const Hardware& hw) {
    const std::uint64_t outside = hw.backend == BackendKind::cpu ? m[Component::overhead] : 0;
    return m.peak > outside ? m.peak - outside : 0;
}

std::uint64_t trained_parameters(const ModelSpec& model, const TrialConfig& c) {
    if (!c.adapters()) return model.param_count();
    const BufferKind a = adapter_buffer(model, c.lora_rank, c.lora_targets, c.adam8bit_block);
    return a.numel * a.count;
}

namespace {

// Every pipeline stage's peak (the first rank of each: a stage's ranks hold the same), and the worst's phases.
std::vector<StageMemory> stage_memories(const ModelSpec& model, const TrialConfig& c, const Hardware& hw,
                                        const EstimateOptions& o, StepMemory& worst) {
    const ParallelPlan plan = parallel_plan(c);
    std::vector<StageMemory> out;
    for (const PipelineStage& stage : pipeline_stages(model, c)) {
        const StepMemory s = step_memory(model, c, hw, o, stage);
        MeshCoordinates at;
        at[MeshAxis::pp] = stage.stage;
        out.push_back(StageMemory{stage.stage, plan.rank_of(at), stage.layers, breakdown_at_peak(s)});
        if (out.size() == 1 || s.peak > worst.peak) worst = s;
    }
    return out;
}

}  // namespace

Estimate estimate(const ModelSpec& model, const TrialConfig& c, const Hardware& hw, const EstimateOptions& o) {
    StepMemory memory;
    std::vector<StageMemory> stages = stage_memories(model, c, hw, o, memory);
    const StepTime time = step_time(model, c, hw, o);
    Estimate e;
    e.memory = breakdown_at_peak(memory);
    if (stages.size() > 1) e.stages = std::move(stages);
    e.host_memory = host_breakdown(memory);
    e.host_node_bytes = e.host_memory.peak * ranks_per_node(c, o);
    e.step_s = time.step_s;
    e.tokens_per_s = time.tokens_per_s;
    e.mfu = time.mfu;
    e.pipeline_bubble = time.bubble_fraction;
    if (o.probed) {
        e.speed_reference_s = o.probed->speed_reference_s;  // the machine speed step_s holds for
        e.pace_exponent = o.pace_exponent;                  // and how the step follows another one
    }
    const bool device_fits = limited_bytes(e.memory, hw) <= usable_bytes(c, hw, o);
    const std::optional<std::uint64_t> host = usable_host_bytes(o.host_memory, o.host_margin);
    const bool host_fits = !host || e.host_node_bytes <= *host;
    e.fits = device_fits && host_fits;
    e.limit = device_fits ? (host_fits ? "" : "host") : (host_fits ? "device" : "device+host");
    return e;
}

}  // namespace tune
