#include "exports/trainer_export.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/parallel_plan.h"
#include "exports/deepspeed_config.h"
#include "exports/hf_arguments.h"

namespace tune {
namespace {

// What PyTorch's own mixed precision and DDP hold beyond tune's engine at ZeRO-0
// (at ZeRO 1-3 DeepSpeed's engine runs the model: its export's notes apply).
std::vector<std::string> trainer_memory_notes(const TrialConfig& c) {
    std::vector<std::string> notes;
    if (c.zero_stage > 0) return notes;
    if (has_master_weights(c.precision))
        notes.emplace_back(
            "PyTorch autocast keeps fp32 weights and fp32 gradients (8 bytes per parameter) where tune holds 16-bit "
            "weights and gradients beside an fp32 master copy (8 bytes per parameter too)");
    if (parallel_plan(c).world() > 1)
        notes.emplace_back(
            "DDP's gradient buckets hold a second copy of the trainable gradients (gradient_as_bucket_view is "
            "false under Trainer); tune estimate --framework counts it");
    return notes;
}

HfArguments trainer_arguments(FrameworkProfile f, const TrialConfig& c, FrameworkExport& e) {
    HfNotes notes;
    HfArguments args = hf_arguments(c, notes);
    // TrainingArguments' `deepspeed` names the file that sets ZeRO, which `--emit deepspeed` writes; what
    // DeepSpeed's engine makes of the optimizer the Trainer hands it holds here as there.
    if (c.zero_stage > 0) {
        args["deepspeed"] = "ds_config.json";
        notes.in_script.push_back(
            fmt::format("ZeRO-{}: the Trainer does it through DeepSpeed: write ds_config.json with `--emit deepspeed`",
                        c.zero_stage));
        if (const auto difference = deepspeed_zero_optimizer_difference(c)) notes.cannot.push_back(*difference);
    }
    add_notes(e, notes);
    e.memory_added = trainer_memory_notes(c);
    note_foreach_adamw(f, c, e);
    return args;
}

std::string shell_quote(const std::string& s) {
    if (s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.=/:,") ==
        std::string::npos)
        return s;
    std::string out = "'";
    for (char ch : s) out += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
    return out + "'";
}

}  // namespace

FrameworkExport hf_trainer_export(const TrialConfig& c) {
    FrameworkExport e;
    e.json = true;
    nlohmann::json j = nlohmann::json::object();
    for (const auto& [k, v] : trainer_arguments(FrameworkProfile::hf_trainer, c, e)) j[k] = v;
    e.body = j.dump(2);
    return e;
}

FrameworkExport torchrun_export(const TrialConfig& c) {
    FrameworkExport e;
    std::string cmd = fmt::format("torchrun --nnodes 1 --nproc_per_node {} train.py", parallel_plan(c).world());
    for (const auto& [key, value] : trainer_arguments(FrameworkProfile::torchrun, c, e)) {
        if (value.is_boolean()) {
            if (value.get<bool>()) cmd += " --" + key;
            continue;
        }
        cmd += " --" + key + " " + shell_quote(value.is_string() ? value.get<std::string>() : value.dump());
    }
    e.body = cmd + "\n";
    e.in_script.push_back(
        "train.py stands for your Hugging Face training script (HfArgumentParser over TrainingArguments)");
    return e;
}

}  // namespace tune
