// Three training steps per optimizer and precision as self-test cases.
#include "harness/selftest_training.h"

#include <fmt/format.h>

#include "harness/comm.h"
#include "harness/data.h"
#include "harness/trainer.h"
#include "kernels/selftest/case_builder.h"
#include "search/presets.h"

namespace tune::harness {

namespace {

namespace st = kernels::selftest;

constexpr int kSteps = 3;

TrialConfig tiny_config(Optimizer optimizer, Precision precision) {
    TrialConfig c;
    c.model = *find_model("tiny");
    c.optimizer = optimizer;
    c.precision = precision;
    c.micro_batch = 2;
    c.context = 64;
    c.steps = kSteps;
    c.warmup = 0;
    c.lr = 1e-3;  // large enough that three steps move the loss
    return c;
}

st::Case training_case(Optimizer optimizer, Precision precision) {
    const TrialConfig c = tiny_config(optimizer, precision);
    return {"train_3_steps/" + std::string(to_string(optimizer)), std::string(to_string(precision)),
            fmt::format("{} b={} s={}", c.model.name, c.micro_batch, c.context), [c](std::uint64_t seed) {
                st::CaseBuilder cb(seed);
                const auto losses = cb.zero_output("losses", kernels::DType::f32, kSteps,
                                                   c.precision == Precision::fp32 ? st::OpClass::training
                                                                                  : st::OpClass::training_half);
                return cb.build([c, losses](kernels::Backend& backend, st::DeviceTensors& d) {
                    SingleRankComm comm;
                    const auto tokens = synthetic_tokens(c.seed, c.model.vocab);
                    Trainer trainer(backend, comm, c, *tokens);
                    float values[kSteps];
                    for (float& v : values) v = static_cast<float>(trainer.step().loss);
                    backend.copy_to_device(d[losses], values, sizeof values);
                });
            }};
}

}  // namespace

std::vector<kernels::selftest::Case> training_cases() {
    std::vector<kernels::selftest::Case> out;
    for (Optimizer o : {Optimizer::adamw, Optimizer::lion, Optimizer::adam8bit, Optimizer::adafactor, Optimizer::lomo})
        for (Precision p : {Precision::fp32, Precision::bf16_mixed, Precision::fp16_mixed, Precision::bf16})
            out.push_back(training_case(o, p));
    return out;
}

}  // namespace tune::harness
