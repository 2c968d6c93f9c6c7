// The estimator's knobs. The sweep driver calibrates the device overhead and
// the compute efficiency from measured trials, so they are settings here.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>

#include "core/config.h"
#include "core/parallel_plan.h"
#include "estimate/library_versions.h"
#include "estimate/probed_rates.h"

namespace tune {

// The dtype a user's script loads a LoRA or QLoRA model's frozen base in under
// bf16-mixed or fp16-mixed (from_pretrained's torch_dtype): fp32, as tune's
// exports write, or the 16-bit compute dtype, as PEFT's sharded-QLoRA examples
// load it (estimate/frameworks/model_dtype.cpp says which stack keeps which).
enum class BaseDtype : std::uint8_t { fp32, half };
inline constexpr std::array<std::string_view, 2> kBaseDtypeNames{"fp32", "16-bit"};
inline std::string_view to_string(BaseDtype d) { return kBaseDtypeNames[static_cast<std::size_t>(d)]; }
inline std::optional<BaseDtype> parse_base_dtype(std::string_view text) {
    for (std::size_t i = 0; i < kBaseDtypeNames.size(); ++i)
        if (kBaseDtypeNames[i] == text) return static_cast<BaseDtype>(i);
    return std::nullopt;
}

struct EstimateOptions {
    // Bytes a rank may use; unset: TrialConfig::memory_limit when nonzero, else the device's memory.
    std::optional<std::uint64_t> memory_limit;
    double margin = 0.05;  // keep this fraction of the limit free
    // Host memory per node for what offload keeps there ([hardware] host_memory); unset: unbounded.
    std::optional<std::uint64_t> host_memory;
    double host_margin = 0.10;  // keep this fraction of host_memory free (the OS, the data loader, the page cache)
    // The ranks one node holds ([resources] gpus_per_node); unset: all of the trial's.
    std::optional<std::uint32_t> ranks_per_node;

    // Device memory outside our allocator (CUDA context, cuBLAS, NCCL); unset:
    // Hardware::runtime_overhead_bytes. On the CPU backend: the process's
    // resident set before the model's first allocation (its baseline), 0 unset.
    std::optional<std::uint64_t> overhead_bytes;
    // Bytes outside our allocator per byte of activations live, in every
    // phase: on a GPU the stream-ordered pool's slack, which grows with the
    // buffers a step frees and allocates again, so it scales with the
    // activations (the real-memory file in docs/results/). Calibration learns it with
    // overhead_bytes; 0 until then.
    double overhead_per_activation_byte = 0.0;
    std::uint32_t cpu_threads = 1;  // OpenMP threads per rank: sizes attention scratch

    // Achieved fraction of the peak FLOP/s over a whole step's GEMMs.
    double compute_efficiency = 0.5;
    // Multiply compute_efficiency per Precision and per Optimizer (indexed by
    // the enum's value): what the driver learns when one runs relatively
    // faster or slower than the rest (on a CPU, 16-bit storage pays for
    // conversions and 8-bit Adam for its quantization), which reorders the
    // predicted front. The product is capped at 1.
    std::array<double, 4> precision_efficiency{1.0, 1.0, 1.0, 1.0};
    std::array<double, 5> optimizer_efficiency{1.0, 1.0, 1.0, 1.0, 1.0};
    // The same per Checkpointing and per ZeRO stage: a step that keeps every
    // activation, or syncs its ranks per layer, runs at its own pace too.
    std::array<double, kCheckpointings.size()> checkpointing_efficiency{1.0, 1.0, 1.0, 1.0};
    std::array<double, 4> zero_efficiency{1.0, 1.0, 1.0, 1.0};
    // And per offload setting: a step that updates on the host runs at its own pace too.
    std::array<double, kOffloads.size()> offload_efficiency{1.0, 1.0, 1.0};
    // Achieved fraction of the link bandwidth by collectives.
    double comm_efficiency = 0.8;
    // Fraction of communication hidden behind compute, by ZeRO stage, as far as
    // the compute it runs beside lasts (estimate/estimate_time.cpp
    // exposed_comm_seconds): the stacks overlap at some stages and not others
    // (framework_profile.cpp apply_profile_options); our engine: none.
    std::array<double, 4> comm_overlap{0.0, 0.0, 0.0, 0.0};
    // Whether offload's host copies hide behind compute and the CPU update
    // behind the copy back, as DeepSpeed's ZeRO-Offload and FSDP's CPU offload
    // schedule them (estimate/estimate_time.cpp apply_offload); tune's engine
    // runs them in order on its stream (false).
    bool offload_overlap = false;
    // Rates measured on this machine (`tune probe`); when set, compute,
    // attention and the optimizer's traffic take them instead of the nominal
    // peaks, and the efficiencies above scale relative to their defaults.
    std::shared_ptr<const ProbedRates> probed;
    // How the step follows the machine's pace against the probes' (Estimate::pace_exponent):
    // calibration learns it from trials that ran at different paces.
    double pace_exponent = 1.0;
    // How speed grows with a micro-batch's tokens beyond what the estimate
    // says (calibration learns it): speed x (tokens / size_reference_tokens)
    // ^ size_exponent; 0, no effect, until learned.
    double size_exponent = 0.0;
    double size_reference_tokens = 1.0;
    // The libraries under the user's stack, where a framework profile's rules depend on them.
    LibraryVersions libraries;
    // The stack's LoRA dropout probability ([framework] lora_dropout), which our engine
    // does not run; tune's exports write 0.0. A dropout keeps a mask and a copy of each input.
    double lora_dropout = 0.0;
    // The dtype the stack's script loads an adapter model's frozen base in ([framework] base_dtype).
    BaseDtype base_dtype = BaseDtype::fp32;
};

// The trial's ranks on one node, which share its host memory and its host's bandwidth.
inline std::uint32_t ranks_per_node(const TrialConfig& c, const EstimateOptions& o) {
    const std::uint32_t world = std::max<std::uint32_t>(parallel_plan(c).world(), 1);
    return std::min(world, std::max<std::uint32_t>(o.ranks_per_node.value_or(world), 1));
}

}  // namespace tune
