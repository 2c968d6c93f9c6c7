// What each pipeline stage of a configuration holds: its chunks' layers, the
// embedding (first stage) and the final norm, head and loss (last stage), and
// the most activations it keeps at once, counted from the schedule's table
// (core/pipeline_schedule.h) in layer-micro-batches. Without pipeline
// parallelism there is one stage holding everything, one micro-batch at a time.
#pragma once

#include <cstdint>
#include <vector>

#include "core/config.h"

namespace tune {

// Which of the outer buffer's tensors a rank holds: all of them without pipeline parallelism; the first
// stage the embedding, the last the final norm and the LM head (a copy of a tied embedding, which the two
// stages' gradients keep equal, as Megatron-Core's embedding group does).
struct OuterParts {
    bool embedding = true;
    bool head = true;
};

struct PipelineStage {
    std::uint32_t stage = 0;                  // the rank's pp coordinate
    std::vector<std::uint32_t> chunk_layers;  // (v) layers of chunk c, virtual stage c p + stage
    std::uint32_t layers = 0;                 // all of its chunks'
    bool embedding = true;                    // the token embedding: the first stage's
    bool head = true;                         // the final norm, LM head and loss: the last stage's
    // The most layers' activations (one micro-batch through one layer each) held at once, the running
    // chunk's included, and the most micro-batches whose inputs the embedding keeps for its backward.
    std::uint32_t held_layers = 0;
    std::uint32_t held_inputs = 1;
    // The most micro-batches between the head chunk's forward and backward: each keeps its targets, losses
    // and the head's input (one with 1F1B, whose last stage runs each backward right after its forward).
    std::uint32_t held_targets = 1;

    std::uint32_t largest_chunk() const;
    OuterParts outer() const { return {embedding, head}; }
    std::vector<std::uint32_t> chunk_first;  // (v) the whole model's index of each chunk's first layer
    // The whole model's index of each of its layers, chunk by chunk: what its layer buffer b holds.
    std::vector<std::uint32_t> whole_layers() const;
};

// The one stage without pipeline parallelism: every layer, the embedding and the head, one micro-batch at a time.
PipelineStage whole_model_stage(std::uint32_t layers);

// (pp) every stage of a configuration of model `m` (a sweep's, standing in for c.model); one holding
// everything where its pipeline cannot be built.
std::vector<PipelineStage> pipeline_stages(const ModelSpec& m, const TrialConfig& c);
inline std::vector<PipelineStage> pipeline_stages(const TrialConfig& c) { return pipeline_stages(c.model, c); }

}  // namespace tune
