// A sweep file (TOML) parsed and validated: what to train, on what, over which
// space, and where results go. Every problem is a ConfigError naming the file,
// line and column, with the fix when there is an obvious one.
//
//   name = "llama7b-h100x8"
//   [model]       preset = "llama-7b" | dims (vocab, hidden, ...) | hf_config = "config.json"
//   [hardware]    gpus, nodes, device ("auto", a preset, "cpu"), memory_limit ("auto", "80GiB"), margin,
//                 host_memory per node ("auto", "512GiB"; offload's limit), host_margin
//   [space]       one list per search dimension (core/dimensions.cpp: optimizer, precision, ...)
//   [constraints] global_batch_tokens, max_world_size            (optional)
//   [trial]       steps, warmup, timeout, launcher, seed, lr, ... (optional)
//   [search]      strategy, budget                               (optional)
//   [framework]   name, bitsandbytes, lora_dropout, base_dtype   (optional: the stack the user trains with)
//   [resources]   gpus_per_node, nodes, cpus, max_concurrent     (optional: what the sweep may use at once)
//   [output]      database, report                               (optional)
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/config.h"
#include "core/dimensions.h"
#include "core/noise_rule.h"
#include "estimate/frameworks/framework_profile.h"
#include "estimate/library_versions.h"
#include "estimate/probed_rates.h"
#include "sweep/strategy.h"

namespace tune {

// The most combinations a sweep may enumerate (about 300 MB of candidates).
inline constexpr std::uint64_t kMaxCombinations = 1'000'000;

// The values to try per search dimension, indexed like dimensions() (never empty
// once read: an omitted key holds the dimension's fallback).
struct SpaceSpec {
    std::array<std::vector<DimValue>, kDimensionCount> values;

    const std::vector<DimValue>& of(std::string_view dimension) const;
    // Number of combinations, valid or not, saturating at UINT64_MAX.
    std::uint64_t size() const;
};

// A trial whose timed steps vary by more than 5% (stddev / mean) runs more steps,
// up to twice its steps: enough for the median to settle on a shared machine,
// at most doubling a sweep's time.
inline constexpr double kDefaultMaxCv = 0.05;
inline constexpr std::uint32_t kDefaultMaxStepsFactor = 2;

// Settings every trial of the sweep shares (the [trial] section).
struct TrialSettings {
    std::uint32_t steps = 6;
    std::uint32_t warmup = 2;
    double timeout_s = 600;
    std::string launcher = "auto";  // auto | local | mpirun | srun
    std::uint64_t seed = 1234;
    double lr = 1e-4;
    double weight_decay = 0.0;
    double clip = 1.0;
    double neftune_alpha = 0.0;
    std::uint32_t adam8bit_block = 256;
    std::optional<double> beta1, beta2, eps;
    std::optional<double> lora_alpha;  // unset: 2 x lora_rank
    // More steps while the timed steps' CV is above max_cv, up to max_steps in all
    // (default kDefaultMaxStepsFactor x steps): a noisy trial earns more samples.
    NoiseRule noise{kDefaultMaxCv, kDefaultMaxStepsFactor * 6};
};

// The [resources] section: what the whole sweep may use at once, so trials that fit
// side by side run concurrently. Each trial still takes [hardware] gpus x nodes.
// A count left out or written "auto" is read from the allocation (Slurm) or the machine.
struct ResourceSpec {
    bool declared = false;                        // without the section, trials run one at a time
    std::optional<std::uint32_t> gpus_per_node;   // nullopt: auto
    std::optional<std::uint32_t> nodes;           // nullopt: auto
    std::optional<std::uint32_t> cpus;            // cores the CPU backend shares out; nullopt: auto
    std::optional<std::uint32_t> max_concurrent;  // at most this many trials at once
};

struct SweepSpec {
    // Rates probed on this machine at sweep start (probe/); null: nominal peaks.
    std::shared_ptr<const ProbedRates> probed;
    std::string name;
    std::filesystem::path path;  // as given on the command line
    std::string text;            // the file's bytes, recorded with the results
    std::string text_hash;       // stable_hash(text): a changed file is a different sweep

    ModelSpec model;

    std::string device = "auto";  // as written
    Hardware hardware;            // the preset for `device`; the cpu preset until "auto" is resolved
    std::uint32_t gpus = 1;       // ranks per node in each trial
    std::uint32_t nodes = 1;
    std::optional<std::uint64_t> memory_limit_setting;  // nullopt means "auto": the device's memory
    double margin = 0.05;                               // keep this fraction of the limit free
    // Host memory per node for offloaded states; nullopt: unbounded (or "auto" before it is resolved).
    std::optional<std::uint64_t> host_memory;
    bool host_memory_auto = false;  // written "auto": this machine's MemTotal, once resolved
    double host_margin = 0.10;      // keep this fraction of host_memory free

    SpaceSpec space;

    std::optional<std::uint64_t> global_batch_tokens;  // [constraints]
    std::optional<std::uint32_t> max_world_size;

    TrialSettings trial;

    SearchStrategy strategy = SearchStrategy::pareto_first;
    std::optional<double> budget_s;

    // The stack the user trains with: pruning, `best` and the reports answer with its
    // prediction; trials and calibration still compare with our engine's (`tune`: that alone).
    FrameworkProfile framework = FrameworkProfile::tune;
    // [framework] bitsandbytes = "0.42.0": the libraries under it, where its rules depend on them.
    LibraryVersions libraries;
    // [framework] lora_dropout = 0.05: the stack's LoRA dropout (EstimateOptions::lora_dropout).
    double lora_dropout = 0.0;
    // [framework] base_dtype = "16-bit": the dtype its script loads an adapter model's base in.
    BaseDtype base_dtype = BaseDtype::fp32;

    ResourceSpec resources;

    std::string database = "tune.db";
    std::string report;  // empty: <name>.html
    // [output] database was written in the file (then it is relative to the file, like every path in it).
    bool database_from_file = false;

    std::uint32_t world_size() const { return gpus * nodes; }
    // Bytes a rank may use: the explicit limit, else the device's memory.
    std::uint64_t memory_limit() const { return memory_limit_setting.value_or(hardware.memory_bytes); }
    // What the estimator compares the predicted peak against.
    std::uint64_t usable_memory() const {
        return static_cast<std::uint64_t>(static_cast<double>(memory_limit()) * (1.0 - margin));
    }
};

// The keys a sweep file's sections take ("" is the top level), as parse_sweep checks them.
struct SweepFileSection {
    std::string_view name;
    std::vector<std::string_view> keys;
};
std::vector<SweepFileSection> sweep_file_keys();

// Reads and validates a sweep file. Throws ConfigError (file:line:column: message).
SweepSpec load_sweep(const std::filesystem::path& path);
// The same from text already in memory; `path` is used for messages and relative paths.
SweepSpec parse_sweep(std::string_view text, const std::filesystem::path& path);

// Replaces an "auto" device with what was detected (nullopt: no GPU, so the
// cpu preset stays). Explicit devices are left alone.
// When the space offloads but the node's host memory is unknown: that the host side is taken as
// unbounded, and how to bound it; nullopt otherwise.
std::optional<std::string> host_memory_note(const SweepSpec& spec);

// host_memory = "auto" becomes machine_memory (this machine's MemTotal; nullopt: unbounded).
void resolve_auto_device(SweepSpec& spec, const std::optional<Hardware>& detected,
                         std::optional<std::uint64_t> machine_memory = std::nullopt);

}  // namespace tune
