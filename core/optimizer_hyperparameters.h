// A configuration's optimizer hyperparameters with each optimizer's published
// defaults filled in where the configuration leaves them unset: what the
// trainer runs (train/optimizer_state) and what the exports write, so a
// framework's own defaults (DeepSpeed's and bitsandbytes' Lion: beta2 0.999)
// never stand in for tune's.
#pragma once

#include <cstdint>

#include "core/config.h"

namespace tune {

struct OptimizerHyperparameters {
    double lr = 1e-4;
    double beta1 = 0.9;
    double beta2 = 0.999;  // torch.optim.AdamW
    double eps = 1e-8;
    double weight_decay = 0.0;
    std::uint32_t block = 256;  // 8-bit Adam's quantization block
};

inline OptimizerHyperparameters optimizer_hyperparameters(const TrialConfig& c) {
    OptimizerHyperparameters h;
    h.lr = c.lr;
    h.weight_decay = c.weight_decay;
    if (c.optimizer == Optimizer::lion) h.beta2 = 0.99;  // Chen et al. 2023
    h.beta1 = c.beta1.value_or(h.beta1);
    h.beta2 = c.beta2.value_or(h.beta2);
    h.eps = c.eps.value_or(h.eps);
    h.block = c.adam8bit_block;
    return h;
}

}  // namespace tune
