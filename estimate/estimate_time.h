// Predicted time of one optimizer step: compute over the device's peak times
// an efficiency, ZeRO's collectives over the link bandwidth, the optimizer's
// memory traffic over HBM bandwidth. From it tokens/s and MFU.
#pragma once

#include <cstdint>

#include "core/config.h"
#include "estimate/estimate_options.h"

namespace tune {

struct StepTime {
    double model_flops_per_token = 0;  // estimate/model_flops.h: what MFU counts
    double flops_per_token = 0;        // plus recomputation (and LOMO's norm pass)
    double comm_bytes = 0;             // sent per rank per step (to its replicas and its tensor-parallel peers)
    double compute_s = 0;
    double comm_s = 0;  // exposed (not overlapped)
    double optimizer_s = 0;
    double attention_s = 0;    // materialized attention's (B, H, S, S) traffic through HBM
    double dequantize_s = 0;   // qlora: each GEMM's NF4 weight dequantized (probed, else through HBM)
    double elementwise_s = 0;  // with probes: norms, RoPE, SwiGLU, embedding, cross-entropy
    double bucket_s = 0;       // of elementwise_s: ZeRO-2/3's gradient buckets (probed)
    double offload_s = 0;      // offload on a GPU: exposed host copies and the CPU's update
    double tensor_comm_s = 0;  // the tensor-parallel group's collectives, on the critical path
    // Pipeline parallelism: the schedule's micro-batches timed through the stages (their work is the
    // compute, attention, dequantize, elementwise and tensor-parallel parts above, for every layer), its
    // bubble, one boundary's send, and the largest stage's share of the layers (of comm, optimizer, offload).
    double pipeline_s = 0;
    double bubble_fraction = 0;
    double pipeline_hop_s = 0;
    double stage_share = 1;
    double step_s = 0;
    double tokens_per_s = 0;  // all ranks together
    double mfu = 0;
};

// Bytes of one collective message of this configuration: one layer's flat
// buffer (the adapters' under LoRA), the unit the trainer's collectives move,
// at which the probes measure bus bandwidth.
double collective_message_bytes(const ModelSpec& m, const TrialConfig& c);

// Bytes of one layer's parameter shard (the adapters' under LoRA) in the weights' dtype: what
// offload moves between host and device per buffer, at which the host link is probed.
double offload_shard_bytes(const ModelSpec& m, const TrialConfig& c);

// `m` is the whole model: each rank computes its tensor-parallel shard of every micro-batch of its replica.
StepTime step_time(const ModelSpec& m, const TrialConfig& c, const Hardware& hw, const EstimateOptions& o);

}  // namespace tune
