// Named models and devices that sweep files and flags refer to.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "core/config.h"

namespace tune {

struct ModelPreset {
    ModelSpec spec;
    std::string_view source;  // where the numbers come from
};

struct DevicePreset {
    Hardware hardware;  // one node's worth of this device, nodes = 1
    std::string_view source;
    std::string_view match;  // substring of the CUDA device name, lower case ("h100"), for auto-detection
};

std::span<const ModelPreset> model_presets();
std::span<const DevicePreset> device_presets();

std::optional<ModelSpec> find_model(std::string_view name);
std::optional<Hardware> find_device(std::string_view name);
// The preset whose `match` occurs in a CUDA device name ("NVIDIA H100 80GB HBM3").
std::optional<Hardware> match_device(std::string_view cuda_name, std::uint64_t total_memory);

// "llama-7b, llama-13b, ..." for error messages.
std::string model_names();
std::string device_names();

}  // namespace tune
