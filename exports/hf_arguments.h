// Hugging Face TrainingArguments for a configuration, shared by the
// hf-trainer, torchrun and accelerate exports.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/config.h"
#include "estimate/frameworks/framework_profile.h"
#include "exports/framework_export.h"

namespace tune {

using HfArguments = std::map<std::string, nlohmann::json>;

// What an export says beside the arguments.
struct HfNotes {
    std::vector<std::string> cannot;     // what TrainingArguments cannot express
    std::vector<std::string> in_script;  // what the training script sets instead
};

// `notes` added to an export's own.
void add_notes(FrameworkExport& e, const HfNotes& notes);

// transformers.optimization.Adafactor as tune runs it (the class's own defaults: relative step,
// parameter scaling), as a script builds it: "optimizer = transformers.optimization.Adafactor(...)".
std::string adafactor_construction(const TrialConfig& c);

// Every hyperparameter tune ran with, the constant learning rate included.
HfArguments hf_arguments(const TrialConfig& c, HfNotes& notes);

// optim="adamw_torch" runs torch.optim.AdamW's foreach step where stack `f` keeps the
// states on the device: its square roots go in the export's memory notes.
void note_foreach_adamw(FrameworkProfile f, const TrialConfig& c, FrameworkExport& e);

}  // namespace tune
