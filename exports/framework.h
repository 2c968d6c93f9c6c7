// A chosen configuration written for the framework the user trains with:
// a DeepSpeed JSON, an accelerate config (FSDP2, or FSDP1, with its
// TrainingArguments), a torchrun command line, Hugging Face
// TrainingArguments, torchtitan's job TOML, LitGPT's fine-tuning YAML or a
// Megatron-LM command line. Each export also says what that framework
// cannot express of the configuration, and the memory the framework is known to add over tune's engine; a configuration
// the framework cannot run at all is refused (ExportRefused) with the reason.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/config.h"
#include "estimate/estimate_options.h"
#include "estimate/frameworks/framework_profile.h"
#include "exports/framework_export.h"

namespace tune {

// Every profile of estimate/frameworks but our engine's has a target here, and every target but
// Megatron-LM's a profile: Megatron-LM runs the tensor-parallel scheme our engine does, and is
// estimated as it (exports/megatron_args.h).
enum class Framework : std::uint8_t {
    deepspeed,
    accelerate_fsdp,
    torchrun,
    hf_trainer,
    accelerate_fsdp1,
    torchtitan,
    litgpt,
    megatron
};
inline constexpr std::array<std::string_view, 8> kFrameworkNames{
    "deepspeed", "accelerate-fsdp", "torchrun", "hf-trainer", "accelerate-fsdp1", "torchtitan", "litgpt", "megatron"};
inline std::string_view to_string(Framework f) { return kFrameworkNames[static_cast<std::size_t>(f)]; }
std::optional<Framework> parse_framework(std::string_view text);

FrameworkExport export_config(Framework f, const TrialConfig& c);

// The body with its notes: as leading `#` comments (YAML, shell), or for JSON
// the body alone on `out` and the notes on `notes`.
struct RenderedExport {
    std::string out;
    std::string notes;
};
RenderedExport render(const FrameworkExport& e, Framework f);

// The estimator's profile of the stack an export targets (estimate/frameworks), and its settings.
FrameworkProfile profile_of(Framework f);
void apply_framework_profile(Framework f, EstimateOptions& o);

}  // namespace tune
