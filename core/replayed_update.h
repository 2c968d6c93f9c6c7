// Which optimizers' updates a graph records once and replays every step
// (kernels::OpGraph): those whose launches are the same every step, the step
// count aside, which they read from device memory (kernels::AdamWParams::
// device_step). AdamW and Lion make a call per flat buffer, 8-bit Adam one per
// tensor. Adafactor's relative step sizes are computed on the host, and LOMO
// updates inside backward. The trainer (train/optimizer_state) and the
// optimizer probe (probe/optimizer_probe) both follow this.
#pragma once

#include "core/config.h"

namespace tune {

inline constexpr bool update_replays(Optimizer o) {
    return o == Optimizer::adamw || o == Optimizer::lion || o == Optimizer::adam8bit;
}

}  // namespace tune
