#include "exports/framework.h"

#include <fmt/format.h>

#include "core/convergence_risk.h"
#include "exports/accelerate_config.h"
#include "exports/deepspeed_config.h"
#include "exports/litgpt_config.h"
#include "exports/megatron_args.h"
#include "exports/model_setup.h"
#include "exports/torchtitan_config.h"
#include "exports/trainer_export.h"
#include "exports/yaml_text.h"

namespace tune {
namespace {

std::string comment_lines(const FrameworkExport& e) {
    std::string out;
    for (const auto& s : e.cannot_express) out += "# cannot express: " + one_line(s) + "\n";
    for (const auto& s : e.cannot_express_any) out += "# cannot express: " + one_line(s) + "\n";
    for (const auto& s : e.in_script) out += "# in your script: " + one_line(s) + "\n";
    for (const auto& s : e.memory_added) out += "# memory added: " + one_line(s) + "\n";
    for (const auto& s : e.risks) out += fmt::format("# {}: {}\n", kConvergenceRiskLabel, one_line(s));
    return out;
}

FrameworkExport export_for(Framework f, const TrialConfig& c) {
    switch (f) {
        case Framework::deepspeed:
            return deepspeed_export(c);
        case Framework::accelerate_fsdp:
            return accelerate_export(c, 2);
        case Framework::accelerate_fsdp1:
            return accelerate_export(c, 1);
        case Framework::torchrun:
            return torchrun_export(c);
        case Framework::hf_trainer:
            return hf_trainer_export(c);
        case Framework::torchtitan:
            return torchtitan_export(c);
        case Framework::litgpt:
            return litgpt_export(c);
        case Framework::megatron:
            return megatron_export(c);
    }
    return deepspeed_export(c);
}

}  // namespace

std::optional<Framework> parse_framework(std::string_view text) {
    for (std::size_t i = 0; i < kFrameworkNames.size(); ++i)
        if (kFrameworkNames[i] == text) return static_cast<Framework>(i);
    return std::nullopt;
}

FrameworkExport export_config(Framework f, const TrialConfig& c) {
    if (auto problem = framework_problem(profile_of(f), c)) throw ExportRefused(*problem);
    FrameworkExport e = export_for(f, c);
    if (const auto risk = convergence_risk(c)) e.risks.emplace_back(*risk);
    // torchtitan, LitGPT and Megatron-LM build their own models: transformers' loading code does not apply.
    if (f == Framework::torchtitan || f == Framework::litgpt || f == Framework::megatron) return e;
    // FSDP flattens parameters under every strategy (FSDP2 runs ZeRO-0 as DDP); ZeRO-3 shards them.
    const bool fsdp = f == Framework::accelerate_fsdp1 || (f == Framework::accelerate_fsdp && c.zero_stage > 0);
    const bool fp32_model = holds_fp32_model(stack_rules(profile_of(f), c), c, BaseDtype::fp32);
    ModelSetup setup = model_setup(c,
                                   fsdp                ? FrameworkSharding::fsdp
                                   : c.zero_stage == 3 ? FrameworkSharding::zero3
                                                       : FrameworkSharding::none,
                                   fp32_model);
    e.in_script.insert(e.in_script.begin(), setup.in_script.begin(), setup.in_script.end());
    e.memory_added.insert(e.memory_added.end(), setup.memory_added.begin(), setup.memory_added.end());
    return e;
}

RenderedExport render(const FrameworkExport& e, Framework f) {
    const std::string header = fmt::format("# tune --emit {}\n", to_string(f)) + comment_lines(e);
    if (e.json) return {e.body + "\n", header};
    return {header + e.body, {}};
}

FrameworkProfile profile_of(Framework f) {
    switch (f) {
        case Framework::deepspeed:
            return FrameworkProfile::deepspeed;
        case Framework::accelerate_fsdp:
        case Framework::accelerate_fsdp1:
            return FrameworkProfile::accelerate_fsdp;
        case Framework::torchrun:
            return FrameworkProfile::torchrun;
        case Framework::hf_trainer:
            return FrameworkProfile::hf_trainer;
        case Framework::torchtitan:
            return FrameworkProfile::torchtitan;
        case Framework::litgpt:
            return FrameworkProfile::litgpt;
        case Framework::megatron:
            return FrameworkProfile::tune;
    }
    return FrameworkProfile::tune;
}

void apply_framework_profile(Framework f, EstimateOptions& o) { apply_profile_options(profile_of(f), o); }

}  // namespace tune
