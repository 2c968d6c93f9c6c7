// A PEFT LoRA adapter folder (Hugging Face peft): adapter_config.json (r,
// lora_alpha, target_modules) and adapter_model.safetensors with PEFT's names,
// "base_model.model.model.layers.3.self_attn.q_proj.lora_A.weight" (r, in) and
// "...lora_B.weight" (out, r). Read for `tune trial --init-adapter`, written
// for `--save-adapter`, so adapters move between tune and PEFT both ways.
#pragma once

#include <filesystem>
#include <string>

#include "core/config.h"
#include "train/model_state.h"
#include "train/param_layout.h"

namespace tune::train {

inline constexpr const char* kPeftPrefix = "base_model.model.";

struct PeftAdapterConfig {
    std::uint32_t rank = 0;
    double alpha = 0;
    LoraTargets targets = LoraTargets::all_linear;
};

// Errors (ConfigError) name the file and key: a missing r, a target module
// tune has no adapter for, or a set of targets that is neither attention nor all-linear.
PeftAdapterConfig load_peft_config(const std::filesystem::path& dir);
// The adapter's rank, alpha and targets in `c` (the trial trains what the folder holds).
void apply_peft_config(const PeftAdapterConfig& peft, TrialConfig& c);

// Every adapter the layout names, with its shape, and nothing else.
HostParams load_peft_adapter(const std::filesystem::path& dir, const ParamLayout& adapter_layout);

// adapter_config.json and adapter_model.safetensors in `dir`, each written
// atomically as a regular file (core/output_file.h); OutputFileError names the path.
void save_peft_adapter(const std::filesystem::path& dir, const TrialConfig& c, const ParamLayout& adapter_layout,
                       const HostParams& adapters);
// Before training: `dir` is (or becomes) a directory in which both files can be
// written; a file, device or FIFO in their place is refused (OutputFileError).
void check_adapter_destination(const std::filesystem::path& dir);

}  // namespace tune::train
