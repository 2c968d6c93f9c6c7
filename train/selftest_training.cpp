// Three training steps per optimizer and precision as self-test cases, and
// the ZeRO stages across ranks against one CPU process.
#include "train/selftest_training.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <iterator>
#include <optional>
#include <utility>

#include <fmt/format.h>

#include "core/presets.h"
#include "core/zero_plan.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/selftest/case_builder.h"
#include "train/comm/comm.h"
#include "train/io/data.h"
#include "train/trainer.h"

namespace tune::train {

namespace {

namespace st = kernels::selftest;

constexpr int kSteps = 3;

TrialConfig tiny_config(Optimizer optimizer, Precision precision, const char* model = "tiny") {
    TrialConfig c;
    c.model = *find_model(model);
    c.optimizer = optimizer;
    c.precision = precision;
    c.micro_batch = 2;
    c.context = 64;
    c.steps = kSteps;
    c.warmup = 0;
    c.lr = 1e-3;  // large enough that three steps move the loss
    return c;
}

// checkpointing and grad_accum vary the step's schedule (recompute in
// backward, gradients summed over micro-batches before the update).
st::Case training_case(Optimizer optimizer, Precision precision, Checkpointing checkpointing = Checkpointing::none,
                       std::uint32_t grad_accum = 1, const char* model = "tiny") {
    TrialConfig c = tiny_config(optimizer, precision, model);
    c.checkpointing = checkpointing;
    c.grad_accum = grad_accum;
    const std::string schedule = checkpointing == Checkpointing::none && grad_accum == 1
                                     ? std::string()
                                     : fmt::format(" ckpt={} accum={}", to_string(checkpointing), grad_accum);
    return {"train_3_steps/" + std::string(to_string(optimizer)), std::string(to_string(precision)),
            fmt::format("{} b={} s={}{}", c.model.name, c.micro_batch, c.context, schedule), [c](std::uint64_t seed) {
                st::CaseBuilder cb(seed);
                const auto losses =
                    cb.zero_output("losses", kernels::DType::f32, kSteps,
                                   c.precision == Precision::fp32 ? st::OpClass::training : st::OpClass::training_half);
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

// ---- ZeRO stages across ranks ------------------------------------------

TrialConfig zero_config(const ZeroSelftestOptions& o, std::uint32_t stage, std::uint32_t ranks) {
    TrialConfig c;
    c.model = *find_model("tiny");
    c.optimizer = Optimizer::adamw;
    c.precision = Precision::fp32;
    c.zero_stage = stage;
    c.world_size = ranks;
    c.micro_batch = 1;
    c.context = o.context;
    c.steps = o.steps;
    c.warmup = 0;
    c.seed = o.seed;
    c.lr = 1e-3;
    // Adam's first steps are about lr * sign(g): a larger eps keeps them smooth
    // in g, so a tiny gradient summed in another order cannot flip its update.
    c.eps = 1e-4;
    return c;
}

// Largest |a - b| over the real tensors of two layouts of the same model
// (their padding differs with the world size; tensor i of buffer j is the same).
double max_param_diff(const ParamLayout& la, const HostParams& a, const ParamLayout& lb, const HostParams& b) {
    double most = 0;
    for (std::size_t i = 0; i < la.buffers(); ++i) {
        const auto& ta = la.flat(i).tensors;
        const auto& tb = lb.flat(i).tensors;
        for (std::size_t t = 0; t < ta.size(); ++t)
            for (std::int64_t e = 0; e < ta[t].numel(); ++e) {
                const double x = a[i][static_cast<std::size_t>(ta[t].offset + e)];
                const double y = b[i][static_cast<std::size_t>(tb[t].offset + e)];
                const double d = std::abs(x - y);
                most = std::isnan(d) ? INFINITY : std::max(most, d);
            }
    }
    return most;
}

struct Reference {
    ParamLayout layout;
    HostParams before, after;
    std::vector<double> losses;
};

// One CPU process with the global batch (micro-batch = world size), stage 0.
Reference cpu_reference(const ZeroSelftestOptions& o, std::uint32_t ranks) {
    TrialConfig c = zero_config(o, 0, 1);
    c.micro_batch = ranks;
    kernels::CpuBackend backend;
    SingleRankComm comm;
    const auto tokens = synthetic_tokens(c.seed, c.model.vocab);
    Trainer trainer(backend, comm, c, *tokens);
    Reference r{trainer.layout(), trainer.model().download_weights(), {}, {}};
    for (std::uint32_t s = 0; s < c.steps; ++s) r.losses.push_back(trainer.step().loss);
    r.after = trainer.model().download_weights();
    return r;
}

}  // namespace

std::vector<ZeroStageResult> zero_stages_against_cpu(kernels::Backend& backend, Comm& comm,
                                                     const ZeroSelftestOptions& options) {
    const auto n = static_cast<std::uint32_t>(comm.world_size());
    const bool reporter = comm.rank() == 0;
    std::optional<Reference> reference;
    std::string reference_error;
    if (reporter) {
        try {
            reference = cpu_reference(options, n);
        } catch (const std::exception& e) {
            reference_error = fmt::format("the CPU reference failed: {}", e.what());
        }
    }
    std::vector<ZeroStageResult> out;
    for (std::uint32_t stage = 0; stage <= kMaxZeroStage; ++stage) {
        ZeroStageResult r;
        r.stage = stage;
        r.ranks = comm.world_size();
        const TrialConfig c = zero_config(options, stage, n);
        // Any missed, repeated or misrouted update moves a weight by about lr per step.
        r.param_tolerance = 0.1 * c.lr;
        r.loss_tolerance = 1e-4;
        const auto tokens = synthetic_tokens(c.seed, c.model.vocab);
        Trainer trainer(backend, comm, c, *tokens);
        std::vector<float> losses;
        for (std::uint32_t s = 0; s < c.steps; ++s) losses.push_back(static_cast<float>(trainer.step().loss));
        // Each rank's loss is over its own rows: the global batch's loss is their mean.
        comm.all_reduce(losses.data(), static_cast<std::int64_t>(losses.size()), kernels::DType::f32,
                        ReduceOp::average);
        const HostParams weights = trainer.model().download_weights();  // collective when sharded
        if (reporter) {
            if (!reference) {
                r.error = reference_error;
            } else {
                r.param_diff = max_param_diff(trainer.layout(), weights, reference->layout, reference->after);
                r.moved = max_param_diff(reference->layout, reference->before, reference->layout, reference->after);
                for (std::size_t s = 0; s < losses.size(); ++s) {
                    const double d = std::abs(static_cast<double>(losses[s]) - reference->losses[s]);
                    r.loss_diff = std::isnan(d) ? INFINITY : std::max(r.loss_diff, d);
                }
                // A reference that barely moved would make any comparison pass.
                r.pass =
                    r.param_diff <= r.param_tolerance && r.loss_diff <= r.loss_tolerance && r.moved > r.param_tolerance;
            }
        }
        out.push_back(r);
    }
    return out;
}

std::vector<kernels::selftest::Case> training_cases() {
    std::vector<kernels::selftest::Case> out;
    for (Optimizer o : {Optimizer::adamw, Optimizer::lion, Optimizer::adam8bit, Optimizer::adafactor, Optimizer::lomo})
        for (Precision p : {Precision::fp32, Precision::bf16_mixed, Precision::fp16_mixed, Precision::bf16})
            out.push_back(training_case(o, p));
    // Checkpointing and accumulation once per optimizer (LOMO cannot accumulate).
    const std::pair<Optimizer, Precision> scheduled[] = {{Optimizer::adamw, Precision::bf16_mixed},
                                                         {Optimizer::lion, Precision::fp16_mixed},
                                                         {Optimizer::adam8bit, Precision::fp32},
                                                         {Optimizer::adafactor, Precision::bf16},
                                                         {Optimizer::lomo, Precision::bf16_mixed}};
    constexpr Checkpointing kRecomputing[] = {Checkpointing::full, Checkpointing::selective,
                                              Checkpointing::selective_op};
    std::size_t i = 0;
    for (const auto& [o, p] : scheduled) {
        const Checkpointing ck = kRecomputing[i++ % std::size(kRecomputing)];
        out.push_back(training_case(o, p, ck, o == Optimizer::lomo ? 1 : 2));
    }
    // The Llama-family variants (biases, q/k norms, tied embeddings, head_dim,
    // llama3 RoPE), with recompute; LOMO holds the tied embedding's gradient.
    out.push_back(training_case(Optimizer::adamw, Precision::fp32, Checkpointing::none, 1, "tiny-variants"));
    out.push_back(training_case(Optimizer::adamw, Precision::bf16_mixed, Checkpointing::full, 2, "tiny-variants"));
    out.push_back(training_case(Optimizer::adamw, Precision::fp32, Checkpointing::selective_op, 2, "tiny-variants"));
    out.push_back(training_case(Optimizer::lomo, Precision::bf16, Checkpointing::none, 1, "tiny-variants"));
    return out;
}

}  // namespace tune::train
