// Model FLOPs: what MFU counts. One rule for the estimator's time model
// (estimate/estimate_time.cpp) and a trial's measured MFU (train/trial.cpp).
// 2 FLOPs per multiply-add; per token of one training step, no recomputation.
//
//   full         6 N + 3 L a       forward 2N, backward 4N (input and weight gradients)
//   lora, qlora  4 N + 6 N_a + 3 L a
//                                  the frozen base's backward computes input gradients
//                                  only (no dW GEMMs, no LM head dW); the adapters train
//
// N: the matmul weights of the layers and the LM head (not the embedding, a
// lookup); N_a: the adapters' weights; a: one layer's attention forward,
// scores and P v (flash: the causal half, 2 s q; eager: the full square
// 4 s q, PaLM's count), its backward twice that whatever the method (dQ, dK,
// dV carry the gradient to the layers below). QLoRA's dequantization is
// memory traffic, not model FLOPs.
#pragma once

#include <vector>

#include "core/config.h"

namespace tune {

// y (T, out) = x (T, in) W^T, with LoRA adapters of rank r (0: none).
struct Linear {
    double in = 0, out = 0, rank = 0;
    bool down = false;  // the MLP's down projection (a full recompute skips its base GEMM)
    // How its base GEMMs treat C (estimate/probed_rates.h GemmOutput): the forward
    // adds into the residual (o, down); the dX adds into the previous linear's (k, v, up).
    bool adds_to_residual = false;
    bool sums_input_grad = false;
    // Recomputed under selective-op checkpointing, whose saved matmul outputs skip every
    // second one (train/model.cpp LlamaLayer::drop): k (kept with q/k norms), o and up.
    bool op_recomputed = false;
};

// One layer's linears in the trainer's order: q, k, v, o, gate, up, down,
// with the adapters' rank on the ones the method targets.
std::vector<Linear> layer_linears(const ModelSpec& m, const TrialConfig& c);

// Per token: forward, and backward (input gradients, plus weight gradients
// unless frozen; the adapters' four GEMMs).
struct LinearFlops {
    double forward = 0, backward = 0;
};
LinearFlops linear_flops(const Linear& l, bool frozen);

// One layer's attention forward per token (scores and P v).
double attention_forward_flops(const ModelSpec& m, const TrialConfig& c);

double model_flops_per_token(const ModelSpec& m, const TrialConfig& c);

}  // namespace tune
