// What the estimator predicts a stack users train with (hf-trainer, deepspeed,
// torchtitan, ...: estimate/frameworks) would show for one configuration: the
// three memory readings a user meets, the step, whether the device view fits
// the sweep's limit, or why that stack cannot run the configuration at all.
// A sweep keeps one per stack beside our engine's estimate, so `tune best
// --framework F` answers for any stack from the database alone.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace tune {

struct FrameworkPrediction {
    std::uint64_t allocated = 0;  // torch.cuda.max_memory_allocated()
    std::uint64_t reserved = 0;   // torch.cuda.max_memory_reserved()
    std::uint64_t device = 0;     // the device's used memory (nvidia-smi)
    std::uint64_t host = 0;       // host memory per rank under offload (0 without)
    double step_s = 0;
    double tokens_per_s = 0;
    bool fits = false;    // device <= the sweep's usable memory, and the node's ranks' host within its host memory
    std::string invalid;  // non-empty: the stack cannot run it, and why
    bool operator==(const FrameworkPrediction&) const = default;
};

// By profile name (estimate/frameworks: "hf-trainer", "deepspeed", ...).
using FrameworkPredictions = std::map<std::string, FrameworkPrediction, std::less<>>;

void to_json(nlohmann::json& j, const FrameworkPrediction& p);
void from_json(const nlohmann::json& j, FrameworkPrediction& p);

// The stored column's text read back; nullopt for text that is not a
// predictions object (a damaged row answers as if it had none).
std::optional<FrameworkPredictions> parse_framework_predictions(const std::string& text);

}  // namespace tune
