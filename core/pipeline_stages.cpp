#include "core/pipeline_stages.h"

#include <algorithm>

#include "core/parallel_plan.h"
#include "core/pipeline_schedule.h"
#include "core/pipeline_split.h"

namespace tune {
namespace {

// The most micro-batches of chunk `chunk` between their forward and backward.
std::uint32_t held_of_chunk(const std::vector<PipelineStep>& steps, std::uint32_t chunk) {
    std::uint32_t held = 0, most = 0;
    for (const PipelineStep& step : steps) {
        if (step.chunk != chunk) continue;
        held = step.backward ? held - 1 : held + 1;
        most = std::max(most, held);
    }
    return most;
}

// Walks a stage's steps: the layers held (forward run, backward not yet).
void count_held(const std::vector<PipelineStep>& steps, PipelineStage& s) {
    std::uint32_t layers = 0;
    s.held_layers = 0;
    for (const PipelineStep& step : steps) {
        const std::uint32_t n = s.chunk_layers[step.chunk];
        layers = step.backward ? layers - n : layers + n;
        s.held_layers = std::max(s.held_layers, layers);
    }
    s.held_inputs = s.embedding ? held_of_chunk(steps, 0) : 0;
    s.held_targets = s.head ? held_of_chunk(steps, static_cast<std::uint32_t>(s.chunk_layers.size()) - 1) : 0;
}

}  // namespace

PipelineStage whole_model_stage(std::uint32_t layers) {
    return PipelineStage{0, {layers}, layers, true, true, layers, 1, 1, {0}};
}

std::uint32_t PipelineStage::largest_chunk() const {
    return chunk_layers.empty() ? 0 : *std::max_element(chunk_layers.begin(), chunk_layers.end());
}

std::vector<std::uint32_t> PipelineStage::whole_layers() const {
    std::vector<std::uint32_t> out;
    for (std::size_t chunk = 0; chunk < chunk_layers.size(); ++chunk)
        for (std::uint32_t l = 0; l < chunk_layers[chunk]; ++l) out.push_back(chunk_first[chunk] + l);
    return out;
}

std::vector<PipelineStage> pipeline_stages(const ModelSpec& m, const TrialConfig& c) {
    const ParallelPlan plan = parallel_plan(c);
    const auto layers = static_cast<std::uint32_t>(m.layers);
    // A pipeline that cannot be built (parallel_problem says why) counts as one stage.
    if (plan.pp == 1 || pipeline_split_problem(layers, plan.pp, plan.virtual_stages, plan.layer_split) ||
        pipeline_schedule_problem(c.pipeline_schedule, plan.pp, plan.virtual_stages, c.grad_accum))
        return {whole_model_stage(layers)};
    const std::vector<std::uint32_t> split = pipeline_layers(layers, plan.pp, plan.virtual_stages, plan.layer_split);
    const PipelineTable table = pipeline_table(c.pipeline_schedule, plan.pp, plan.virtual_stages, c.grad_accum);
    std::vector<PipelineStage> out;
    for (std::uint32_t i = 0; i < plan.pp; ++i) {
        PipelineStage s;
        s.stage = i;
        for (std::uint32_t chunk = 0; chunk < plan.virtual_stages; ++chunk) {
            s.chunk_layers.push_back(split[table.virtual_stage(i, chunk)]);
            s.chunk_first.push_back(pipeline_first_layer(split, table.virtual_stage(i, chunk)));
        }
        for (std::uint32_t n : s.chunk_layers) s.layers += n;
        s.embedding = i == 0;
        s.head = i + 1 == plan.pp;
        count_held(table.steps[i], s);
        out.push_back(std::move(s));
    }
    return out;
}

}  // namespace tune
