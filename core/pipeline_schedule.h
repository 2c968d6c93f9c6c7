// A pipeline schedule as a table: the forward and backward steps each stage
// runs, in order, computed once and read by the trainer (which runs it), the
// estimator (which counts each stage's activations from it) and the time model
// (which times it). Nothing else decides what a stage holds or waits for.
//
//   p stages, v model chunks per stage (virtual stages), m micro-batches.
//   Virtual stage g = chunk * p + stage holds layers [g L/(pv), (g+1) L/(pv)):
//   with v > 1 a stage holds v chunks spaced p apart (Megatron-Core's
//   interleaved 1F1B, megatron/core/pipeline_parallel/schedules.py
//   forward_backward_pipelining_with_interleaving; torchtitan's
//   ScheduleInterleaved1F1B, torch.distributed.pipelining).
//   1F1B: stage i runs min(p - i - 1, m) forwards, then one forward and one
//   backward in turn, then the remaining backwards; it holds at most
//   min(m, p - i) micro-batches' activations.
//   Interleaved: (p - i - 1) 2 + (v - 1) p warm-up forwards, over chunks in
//   groups of p micro-batches; stage 0 holds (1 + (p - 1)/(p v)) times the
//   activations 1F1B's stage 0 holds (Megatron's memory formula).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/config.h"

namespace tune {

// One step of a stage: the forward or backward of one micro-batch through one of its chunks.
struct PipelineStep {
    std::uint32_t micro_batch = 0;
    std::uint32_t chunk = 0;  // 0 .. v-1: virtual stage chunk * p + stage
    bool backward = false;
    bool operator==(const PipelineStep&) const = default;
};

struct PipelineTable {
    std::uint32_t stages = 1;                      // p
    std::uint32_t virtual_stages = 1;              // v: chunks per stage
    std::uint32_t micro_batches = 1;               // m
    std::vector<std::vector<PipelineStep>> steps;  // (p) each stage's steps in the order it runs them

    std::uint32_t virtual_stage(std::uint32_t stage, std::uint32_t chunk) const { return chunk * stages + stage; }
};

// Why a schedule cannot run these sizes (a size of 0, fewer micro-batches than stages, interleaving with one
// chunk or with micro-batches not a multiple of the stages, 1F1B with chunks); nullopt when it can.
std::optional<std::string> pipeline_schedule_problem(PipelineSchedule s, std::uint32_t stages,
                                                     std::uint32_t virtual_stages, std::uint32_t micro_batches);

// The table; a std::invalid_argument naming the problem above where there is one.
PipelineTable pipeline_table(PipelineSchedule s, std::uint32_t stages, std::uint32_t virtual_stages,
                             std::uint32_t micro_batches);

// (p) the most chunk-micro-batches whose activations a stage holds at once: forwards run and not yet backward.
std::vector<std::uint32_t> peak_in_flight(const PipelineTable& t);

// The table timed: each step waits for the stage's previous step and for the step it depends on (the previous
// virtual stage's forward, the next one's backward, or its own forward for the last virtual stage's backward),
// plus `hop_s` where that step ran on another stage. forward_s and backward_s are one micro-batch's through
// each virtual stage (p v of them, in virtual-stage order), or through every chunk alike.
struct PipelineTiming {
    double makespan_s = 0;
    double bubble_fraction = 0;  // the stages' idle time over p x makespan
    std::vector<double> busy_s;  // (p)
};
PipelineTiming time_pipeline(const PipelineTable& t, std::span<const double> forward_s,
                             std::span<const double> backward_s, double hop_s = 0);
PipelineTiming time_pipeline(const PipelineTable& t, double forward_s, double backward_s, double hop_s = 0);

// (p - 1) / (v m + p - 1): the closed form the table reproduces without hops.
double pipeline_bubble_closed_form(std::uint32_t stages, std::uint32_t virtual_stages, std::uint32_t micro_batches);

}  // namespace tune
