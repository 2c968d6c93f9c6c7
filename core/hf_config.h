// A Hugging Face config.json read into a ModelSpec: the sweep file's
// [model] hf_config, tune estimate --hf-config and the trainer's --init read it.
#pragma once

#include <filesystem>

#include "core/config.h"

namespace tune {

// Reads a Llama-family config.json (Llama, Mistral, Qwen2, Qwen3); a field that
// changes the parameters or memory and that tune cannot count is a ConfigError naming it.
ModelSpec load_hf_config(const std::filesystem::path& path);

}  // namespace tune
