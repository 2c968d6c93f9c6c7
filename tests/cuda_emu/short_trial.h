// The short trial the emulated-device training tests run: two steps of the
// tiny model, the second timed, with accumulation except under LOMO (which
// cannot accumulate).
#pragma once

#include "core/config.h"
#include "core/presets.h"

namespace tune_emu_test {

inline tune::TrialConfig tiny_short_trial(tune::Optimizer o, tune::Precision p) {
    tune::TrialConfig c;
    c.model = *tune::find_model("tiny");
    c.optimizer = o;
    c.precision = p;
    c.micro_batch = 1;
    c.context = 16;
    c.steps = 2;
    c.warmup = 1;
    c.lr = 1e-3;
    c.grad_accum = o == tune::Optimizer::lomo ? 1 : 2;
    return c;
}

}  // namespace tune_emu_test
