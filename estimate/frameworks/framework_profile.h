// What the frameworks users train with would hold and show for a
// configuration: our engine's estimate, plus each framework's own terms (one
// small rules file per framework in this folder), read out in the three views
// a user meets: torch.cuda.max_memory_allocated(), max_memory_reserved(), and
// the device's used memory as nvidia-smi shows it.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/config.h"
#include "core/framework_prediction.h"
#include "estimate/estimate_memory.h"
#include "estimate/estimate_options.h"

namespace tune {

// `tune` is our engine itself; every other name is a whole stack
// (transformers' modelling under a launcher or engine, or a framework's own model).
enum class FrameworkProfile : std::uint8_t {
    tune,
    hf_trainer,
    torchrun,
    deepspeed,
    accelerate_fsdp,
    torchtitan,
    litgpt
};
inline constexpr std::array<std::string_view, 7> kFrameworkProfileNames{
    "tune", "hf-trainer", "torchrun", "deepspeed", "accelerate-fsdp", "torchtitan", "litgpt"};
inline std::string_view to_string(FrameworkProfile f) { return kFrameworkProfileNames[static_cast<std::size_t>(f)]; }
std::optional<FrameworkProfile> parse_framework_profile(std::string_view text);

enum class MemoryView : std::uint8_t { allocated, reserved, device };
inline constexpr std::array<std::string_view, 3> kMemoryViewNames{"allocated", "reserved", "device"};
std::optional<MemoryView> parse_memory_view(std::string_view text);

struct MemoryViews {
    std::array<std::uint64_t, 3> bytes{};
    std::uint64_t operator[](MemoryView v) const { return bytes[static_cast<std::size_t>(v)]; }
    std::uint64_t& operator[](MemoryView v) { return bytes[static_cast<std::size_t>(v)]; }
};

// One thing a framework holds beyond (or instead of) what our engine holds,
// in bytes per rank, in the phases of a step where it is alive.
struct FrameworkTerm {
    std::string what;
    std::int64_t bytes = 0;
    std::array<bool, kPhaseCount> alive{};
};
// Every phase: a term the framework holds from start to end of the step.
inline constexpr std::array<bool, kPhaseCount> kWholeStep{true, true, true, true, true};
// The phases named, and no other.
inline std::array<bool, kPhaseCount> alive_in(std::initializer_list<Phase> phases) {
    std::array<bool, kPhaseCount> alive{};
    for (Phase p : phases) alive[static_cast<std::size_t>(p)] = true;
    return alive;
}

// Seconds a framework's step spends beyond (or, negative, instead of) our engine's.
struct FrameworkTimeTerm {
    std::string what;
    double seconds = 0;
};

struct FrameworkEstimate {
    Estimate engine;  // our engine's estimate of the configuration
    std::vector<FrameworkTerm> terms;
    // Blocks PyTorch's caching allocator keeps reserved beyond the allocated ones:
    // they count in the reserved and device views, not in the allocated one.
    std::vector<FrameworkTerm> cached;
    // The stack's step: our engine's, priced with the profile's options, plus the time terms.
    std::vector<FrameworkTimeTerm> time_terms;
    double step_s = 0;
    double tokens_per_s = 0;  // all ranks together
    double mfu = 0;
    MemoryViews views;
    // Under offload: what the stack keeps in host memory beyond our engine's
    // host ledger (whole step), and the total per rank.
    std::vector<FrameworkTerm> host_terms;
    std::uint64_t host = 0;
};

// The stack whose rules `c` follows under profile `f` (model_dtype.cpp): HF Trainer
// and a torchrun script at ZeRO 1-3 run DeepSpeed's engine, as their export writes;
// accelerate's FSDP2 at ZeRO-0 is DDP under autocast, as HF Trainer runs it.
FrameworkProfile stack_rules(FrameworkProfile f, const TrialConfig& c);
// Whether stack `r` keeps the model's weights in fp32 under mixed precision, the
// frozen base loaded in `base` (model_dtype.cpp); false outside mixed precision.
bool holds_fp32_model(FrameworkProfile r, const TrialConfig& c, BaseDtype base);
// What stack `r` holds for its weights' dtype beyond our engine: an fp32 frozen
// base, DDP's bucket copy of the trainable gradients.
std::vector<FrameworkTerm> model_dtype_terms(FrameworkProfile r, const TrialConfig& c, BaseDtype base);

// The estimator settings a profile changes (torchtitan's overlapped
// collectives); framework_estimate applies them.
void apply_profile_options(FrameworkProfile f, EstimateOptions& o);

// The terms of each stack's rules file (estimate/frameworks/*.cpp), from our engine's step.
std::vector<FrameworkTerm> transformers_terms(FrameworkProfile f, const TrialConfig& c, const EstimateOptions& o,
                                              const StepMemory& engine);
// Bytes one layer of transformers' Llama (with PEFT's LoRA modules under adapters) keeps per
// token under stack `f`, beside the attention's statistics; `autocast`: an fp32 model under
// torch.autocast (transformers_model.cpp).
double transformers_layer_saved_per_token(FrameworkProfile f, const TrialConfig& c, bool autocast, double lora_dropout);
std::vector<FrameworkTerm> litgpt_terms(const TrialConfig& c, const EstimateOptions& o, const StepMemory& engine);
// bitsandbytes' 4-bit matmuls before 0.43.2 keep their inputs (0 bytes otherwise).
struct KeptInputs {
    bool held_to_next_step = false;       // the loop keeps the step's graph until the next forward returns
    bool attention_output_copied = true;  // the output projection's input is a copy, not a view of SDPA's output
};
FrameworkTerm bnb_kept_inputs(const TrialConfig& c, const LibraryVersions& v, KeptInputs how);
// bitsandbytes' QuantState stays whole on each rank's device where ZeRO-3 or FSDP
// shards (and offloads) the 4-bit codes: the part our engine shards or offloads
// with them (0 bytes without QLoRA or parameter sharding).
FrameworkTerm bnb_quant_state_term(const TrialConfig& c);
// Bytes one layer of LitGPT's model keeps per token for backward under a LoRA dropout of `lora_dropout` (litgpt.cpp).
double litgpt_layer_saved_per_token(const TrialConfig& c, double lora_dropout);
std::vector<FrameworkTerm> torchtitan_terms(const TrialConfig& c, const StepMemory& engine);
// FSDP at FULL_SHARD (accelerate-fsdp, torchtitan's FSDP2 at ZeRO-3): the root unit kept
// gathered through the step, the prefetched next layer.
std::vector<FrameworkTerm> fsdp_gather_terms(const TrialConfig& c);
// FSDP at SHARD_GRAD_OP and FULL_SHARD, full fine-tunes: the head's gradient held to the
// root unit's post-backward, and with `fsdp2_fp32_reduce` (torchtitan's FSDP2) the
// previous layer's fp32 reduce-scatter input.
std::vector<FrameworkTerm> fsdp_gradient_terms(const TrialConfig& c, bool fsdp2_fp32_reduce);
// Under CPU offload (optimizer+params): the largest unit's shard, copied to the device on a stream of
// FSDP's own, whose block the caching allocator keeps reserved (FrameworkEstimate::cached); `fp32_shards`:
// the stack keeps its shards in fp32 (torchtitan's, or an fp32 model under accelerate's FSDP).
std::vector<FrameworkTerm> fsdp_offload_cached_terms(const TrialConfig& c, bool fp32_shards);
// One decoder layer as FSDP gathers it on a rank (its NF4 storage under QLoRA).
std::uint64_t fsdp_gathered_layer_bytes(const TrialConfig& c);
// The loss over the whole vocabulary on the upcast logits, the 16-bit logits dropped before
// backward (torchtitan, transformers under Trainer: full_vocab_loss.cpp): its fp32 log-softmax and
// gradients at the head's backward, and the blocks it leaves reserved beside them
// (FrameworkEstimate::cached). `vocab`: the rank's vocabulary (its shard under loss_parallel).
FrameworkTerm full_vocab_loss_term(const TrialConfig& c, std::uint64_t vocab, const StepMemory& engine);
std::vector<FrameworkTerm> full_vocab_loss_cached_terms(const TrialConfig& c, std::uint64_t vocab);
// The blocks torchtitan's loss leaves reserved, over the rank's vocabulary shard (torchtitan.cpp).
std::vector<FrameworkTerm> torchtitan_cached_terms(const TrialConfig& c);
// DeepSpeed's flattened gradient partition and its fp32 cast in the optimizer step; without ZeRO,
// FP16_Optimizer's fp32 casts and their flat copy (0 bytes at fp32 or under offload).
FrameworkTerm deepspeed_gradient_term(const TrialConfig& c);
// ZeRO-1 to 3's contiguous gradient bucket of reduce_bucket_size elements (0 bytes at ZeRO-0).
FrameworkTerm deepspeed_bucket_term(const TrialConfig& c);
// Under offload: DeepSpeed's host buffers beyond our engine's host ledger, and
// its device staging for the largest parameter's gradient (0 bytes without).
std::vector<FrameworkTerm> deepspeed_host_terms(const TrialConfig& c);
FrameworkTerm deepspeed_offload_device_term(const TrialConfig& c);
// ZeRO-3: the parameters prefetched beside the gathered layer, the small ones never partitioned.
std::vector<FrameworkTerm> deepspeed_zero3_parameter_terms(const TrialConfig& c);

// torch.optim.AdamW's foreach step, where the stack runs it on the device (HF Trainer
// and torchrun at ZeRO-0, accelerate's FSDP): a second moment's worth of square
// roots in the optimizer step (0 bytes elsewhere; torch_adamw.cpp).
FrameworkTerm foreach_adamw_term(FrameworkProfile f, const TrialConfig& c);

FrameworkEstimate framework_estimate(FrameworkProfile f, const TrialConfig& c, const Hardware& hw,
                                     const EstimateOptions& o = {});

// Why the stack cannot run the configuration at all (LOMO under DeepSpeed,
// ZeRO-1 under FSDP, pure bf16 under torchtitan, ...), or nullopt; the one
// rule set beyond core/validity (framework_validity.cpp). `tune` is our engine: never.
std::optional<std::string> framework_problem(FrameworkProfile f, const TrialConfig& c);

// Every stack's prediction but our engine's (which is the Estimate itself),
// `fits` judged against `usable` bytes of device memory.
FrameworkPredictions framework_predictions(const TrialConfig& c, const Hardware& hw, const EstimateOptions& o,
                                           std::uint64_t usable);
// The same from our engine's estimate of `c` under `o`, which the caller has made already.
FrameworkPredictions framework_predictions(const TrialConfig& c, const Hardware& hw, const EstimateOptions& o,
                                           std::uint64_t usable, const Estimate& engine);

}  // namespace tune
