// The one rule set that says whether a configuration can run: used by the
// space expansion (sweep/space), `tune estimate` and `tune trial` flags, the
// trial (train/trial) and the trainer. A sweep's own [constraints] rules
// stay in sweep/space; everything the engine itself cannot express is here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/config.h"

namespace tune {

// Largest value of each model dimension. Far above every real model, and low
// enough that the parameter count and the estimator's products cannot wrap
// around a uint64 (a 2^62 vocabulary "fit" in 2.5 MiB before these existed).
inline constexpr std::uint64_t kMaxVocab = std::uint64_t{1} << 24;
inline constexpr std::uint64_t kMaxHidden = std::uint64_t{1} << 18;
inline constexpr std::uint64_t kMaxLayers = std::uint64_t{1} << 14;
inline constexpr std::uint64_t kMaxFfn = std::uint64_t{1} << 20;
inline constexpr std::uint64_t kMaxContext = std::uint64_t{1} << 24;
// Largest count of each per-trial dimension, for the same reason.
inline constexpr std::uint32_t kMaxMicroBatch = 1 << 16;
inline constexpr std::uint32_t kMaxGradAccum = 1 << 16;
inline constexpr std::uint32_t kMaxWorldSize = 1 << 20;
inline constexpr std::uint32_t kMaxSteps = 1000000;
// Bytes no machine has: a configuration whose largest buffers exceed it is refused, not estimated.
inline constexpr std::uint64_t kMaxBytes = std::uint64_t{1} << 60;
// 8-bit Adam's block: a power of two in this range (a block of 0 divided by zero).
inline constexpr std::uint32_t kMinAdam8bitBlock = 64;
inline constexpr std::uint32_t kMaxAdam8bitBlock = 4096;

struct Invalidity {
    // Short stable tag for counting: "model-shape", "model-size", "model-constants", "counts", "zero-stage",
    // "lomo-accumulation", "context", "adam8bit-block", "hyperparameters", "warmup", "tensor-parallel",
    // "parallel-plan", and the sweep's own "world-size", "global-batch", "framework" (sweep/space).
    std::string_view kind;
    std::string reason;  // the sentence shown to the user
};

// Why this model cannot be built (shape, bounds, a size past kMaxBytes), or nullopt.
std::optional<Invalidity> model_problem(const ModelSpec& m);

// embedding + layers + final norm + head, or nullopt when it does not fit in a uint64.
std::optional<std::uint64_t> checked_param_count(const ModelSpec& m);

// Why the engine cannot run this configuration of its model, or nullopt when it can.
std::optional<Invalidity> invalid_reason(const TrialConfig& config);

// Whether the problem is a value no configuration may have (a flag or key
// given wrong: bad input, exit 2) rather than valid values the engine cannot
// combine (lomo with accumulation, a context over the model's: status invalid).
bool refuses_input(const Invalidity& problem);

// Warmup steps below the steps, so some are measured. A rule of the sweep
// file and of `tune trial`'s flags, not of the engine: a library caller may
// run steps without measuring throughput.
std::optional<Invalidity> warmup_problem(const TrialConfig& config);

// Why a CPU thread count is refused (negative, or beyond what `cores` can
// sensibly run: OpenMP aborts on huge counts), or nullopt. 0 means the default.
std::optional<std::string> threads_problem(int threads, unsigned cores);
inline constexpr unsigned kThreadsPerCoreLimit = 4;

}  // namespace tune
