#pragma once
// Dynamic loss scaling for fp16 training (Micikevicius et al. 2018; the
// scheme of DeepSpeed and LOMO): start at 2^16, multiply by `factor` after
// `window` consecutive steps without overflow, divide by it on an overflow
// and skip that step. The scaler is host-side state; unscaling is per element.
#include "kernels/math/half.h"
#include "kernels/math/hd.h"

namespace tune::math {

struct LossScalerConfig {
    float initial = 65536.0f;
    float factor = 2.0f;
    int window = 1000;
    float min_scale = 1.0f;
};
inline constexpr LossScalerConfig kLossScalerDefaults{};

class LossScaler {
public:
    explicit LossScaler(const LossScalerConfig& config = kLossScalerDefaults)
        : config_(config), scale_(config.initial) {}

    float scale() const { return scale_; }
    float inverse() const { return 1.0f / scale_; }
    int good_steps() const { return good_steps_; }

    // Records one step's outcome; returns whether its update may be applied.
    bool update(bool overflow) {
        if (overflow) {
            const float reduced = scale_ / config_.factor;
            scale_ = reduced > config_.min_scale ? reduced : config_.min_scale;
            good_steps_ = 0;
            return false;
        }
        if (++good_steps_ >= config_.window) {
            const float grown = scale_ * config_.factor;
            if (is_finite(grown)) scale_ = grown;
            good_steps_ = 0;
        }
        return true;
    }

private:
    LossScalerConfig config_;
    float scale_;
    int good_steps_ = 0;
};

// One gradient element unscaled; a non-finite input sets `overflow`.
TUNE_HD inline float unscale(float g, float inv_scale, bool& overflow) {
    if (!is_finite(g)) overflow = true;
    return g * inv_scale;
}

}  // namespace tune::math
