// A Hugging Face Llama-family folder (Llama, Mistral, Qwen2, Qwen3):
// config.json (dimensions) and model.safetensors (weights with the usual
// *ForCausalLM names), read into a ModelSpec and fp32 flat buffers; and
// written, for fixtures and tests.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "core/config.h"
#include "train/model_state.h"
#include "train/param_layout.h"

namespace tune::train {

// hidden_size, intermediate_size, num_hidden_layers, num_attention_heads,
// num_key_value_heads (default: heads), vocab_size, rms_norm_eps (1e-6),
// rope_theta (10000), max_position_embeddings. Errors name the file and key.
ModelSpec load_hf_config(const std::filesystem::path& dir);

// Why the trainer cannot run `c`'s model, naming the Hugging Face field: a
// rope_scaling type other than linear and llama3, or a sliding_window shorter
// than the context; nullopt when it can. The estimator counts both.
std::optional<std::string> trainer_unsupported(const TrialConfig& c);

// Every tensor the layout names must be present with its shape, and nothing
// else; errors list the missing, extra and mis-shaped tensors.
HostParams load_hf_weights(const std::filesystem::path& dir, const ParamLayout& layout);

// config.json and model.safetensors (F32) for `model` with weights `params`.
void save_hf_model(const std::filesystem::path& dir, const ModelSpec& model, const ParamLayout& layout,
                   const HostParams& params);

}  // namespace tune::train
