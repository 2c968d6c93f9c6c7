// Core value types shared by the search side (spec, estimator, driver, store,
// reports) and the trial side (train). Plain structs, JSON round-trip, and a
// canonical hash that is stable across runs and platforms.
//
//   ModelSpec     what is trained (Llama dimensions)
//   Hardware      where it runs (one device kind, how many, how they connect)
//   TrialConfig   one point of the search space, complete enough to rerun it
//   MemoryBreakdown / Estimate / TrialResult   what was predicted and measured
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/config_error.h"
#include "core/memory_components.h"
#include "core/step_statistics.h"

namespace tune {

// ---------------------------------------------------------------- enums ----

enum class Optimizer : std::uint8_t { adamw, lion, adam8bit, adafactor, lomo };
enum class Precision : std::uint8_t { fp32, bf16_mixed, fp16_mixed, bf16 };
// selective drops the eager attention probabilities; selective_op is torchtitan's
// "op" policy, which keeps the matmul outputs but every second one and the
// attention output (train/model.cpp LlamaLayer::drop says what each keeps).
enum class Checkpointing : std::uint8_t { none, selective, full, selective_op };
// flash keeps only the log-sum-exp (b, heads, s) and recomputes the scores in
// backward; eager keeps the (b, heads, s, s) probabilities (docs/memory-model.md §3).
enum class Attention : std::uint8_t { flash, eager };
enum class TrialStatus : std::uint8_t { pending, running, ok, oom, failed, timeout, invalid, pruned };
// Where ops run. A device (Hardware) is cpu or cuda; a trial's --backend may
// also be `automatic` ("auto": CUDA when a device is visible, else the CPU).
enum class BackendKind : std::uint8_t { cpu, cuda, automatic };
// What is trained: every weight (full), low-rank adapters beside a frozen base
// (lora), or adapters beside a frozen base stored as 4-bit NF4 (qlora).
enum class Method : std::uint8_t { full, lora, qlora };
// Which linear layers get adapters: q, k, v, o; or those plus gate, up, down.
enum class LoraTargets : std::uint8_t { attention, all_linear, qv };
// Which training states live in host memory (core/offload_plan.h says what each moves).
enum class Offload : std::uint8_t { none, optimizer, optimizer_params };
// The order a pipeline's stages run their micro-batches (core/pipeline_schedule.h).
enum class PipelineSchedule : std::uint8_t { one_f_one_b, interleaved };
// Which virtual stages count the embedding or the loss as a layer, and so hold one layer less (Megatron-LM's
// --account-for-embedding-in-pipeline-split, --account-for-loss-in-pipeline-split; core/pipeline_split.h).
enum class PipelineSplit : std::uint8_t { even, embedding, loss, embedding_loss };

inline constexpr std::array<Optimizer, 5> kOptimizers{Optimizer::adamw, Optimizer::lion, Optimizer::adam8bit,
                                                      Optimizer::adafactor, Optimizer::lomo};
inline constexpr std::array<Precision, 4> kPrecisions{Precision::fp32, Precision::bf16_mixed, Precision::fp16_mixed,
                                                      Precision::bf16};
inline constexpr std::array<Checkpointing, 4> kCheckpointings{Checkpointing::none, Checkpointing::selective,
                                                              Checkpointing::full, Checkpointing::selective_op};
inline constexpr std::array<Attention, 2> kAttentions{Attention::flash, Attention::eager};
inline constexpr std::array<TrialStatus, 8> kStatuses{TrialStatus::pending, TrialStatus::running, TrialStatus::ok,
                                                      TrialStatus::oom,     TrialStatus::failed,  TrialStatus::timeout,
                                                      TrialStatus::invalid, TrialStatus::pruned};
inline constexpr std::array<BackendKind, 3> kBackendKinds{BackendKind::cpu, BackendKind::cuda, BackendKind::automatic};
inline constexpr std::array<Method, 3> kMethods{Method::full, Method::lora, Method::qlora};
inline constexpr std::array<LoraTargets, 3> kLoraTargets{LoraTargets::attention, LoraTargets::all_linear,
                                                         LoraTargets::qv};
inline constexpr std::array<Offload, 3> kOffloads{Offload::none, Offload::optimizer, Offload::optimizer_params};
inline constexpr std::array<PipelineSchedule, 2> kPipelineSchedules{PipelineSchedule::one_f_one_b,
                                                                    PipelineSchedule::interleaved};
inline constexpr std::array<PipelineSplit, 4> kPipelineSplits{PipelineSplit::even, PipelineSplit::embedding,
                                                              PipelineSplit::loss, PipelineSplit::embedding_loss};

// The names users write, indexed by the enum's value (the dimension table's choices too).
inline constexpr std::array<std::string_view, 5> kOptimizerNames{"adamw", "lion", "adam8bit", "adafactor", "lomo"};
inline constexpr std::array<std::string_view, 4> kPrecisionNames{"fp32", "bf16-mixed", "fp16-mixed", "bf16"};
inline constexpr std::array<std::string_view, 4> kCheckpointingNames{"none", "selective", "full", "selective-op"};
inline constexpr std::array<std::string_view, 2> kAttentionNames{"flash", "eager"};
inline constexpr std::array<std::string_view, 3> kMethodNames{"full", "lora", "qlora"};
inline constexpr std::array<std::string_view, 3> kLoraTargetNames{"attention", "all-linear", "qv"};
inline constexpr std::array<std::string_view, 3> kOffloadNames{"none", "optimizer", "optimizer+params"};
inline constexpr std::array<std::string_view, 2> kSwitchNames{"off", "on"};
inline constexpr std::array<std::string_view, 2> kPipelineScheduleNames{"1f1b", "interleaved"};
inline constexpr std::array<std::string_view, 4> kPipelineSplitNames{"even", "embedding", "loss", "embedding+loss"};

inline std::string_view to_string(Optimizer o) { return kOptimizerNames[static_cast<std::size_t>(o)]; }
inline std::string_view to_string(Precision p) { return kPrecisionNames[static_cast<std::size_t>(p)]; }
inline std::string_view to_string(Checkpointing c) { return kCheckpointingNames[static_cast<std::size_t>(c)]; }
inline std::string_view to_string(Attention a) { return kAttentionNames[static_cast<std::size_t>(a)]; }
inline std::string_view to_string(Method m) { return kMethodNames[static_cast<std::size_t>(m)]; }
inline std::string_view to_string(LoraTargets t) { return kLoraTargetNames[static_cast<std::size_t>(t)]; }
inline std::string_view to_string(Offload o) { return kOffloadNames[static_cast<std::size_t>(o)]; }
inline std::string_view to_string(PipelineSchedule s) { return kPipelineScheduleNames[static_cast<std::size_t>(s)]; }
inline std::string_view to_string(PipelineSplit s) { return kPipelineSplitNames[static_cast<std::size_t>(s)]; }
inline std::string_view to_string(TrialStatus s) {
    constexpr std::array<std::string_view, 8> names{"pending", "running", "ok",      "oom",
                                                    "failed",  "timeout", "invalid", "pruned"};
    return names[static_cast<std::size_t>(s)];
}
inline std::string_view to_string(BackendKind b) {
    constexpr std::array<std::string_view, 3> names{"cpu", "cuda", "auto"};
    return names[static_cast<std::size_t>(b)];
}

// Parse helpers return nullopt on unknown text; callers build the error with context.
template <typename Enum, std::size_t N>
std::optional<Enum> parse_enum(std::string_view text, const std::array<Enum, N>& all) {
    for (Enum e : all)
        if (to_string(e) == text) return e;
    return std::nullopt;
}
inline std::optional<TrialStatus> parse_status(std::string_view t) { return parse_enum(t, kStatuses); }
inline std::optional<BackendKind> parse_backend(std::string_view t) { return parse_enum(t, kBackendKinds); }

// Bytes per element of the weights as stored on the device.
inline constexpr std::uint32_t weight_bytes(Precision p) { return p == Precision::fp32 ? 4 : 2; }
// Mixed precision keeps an fp32 master copy beside half-precision weights.
inline constexpr bool has_master_weights(Precision p) {
    return p == Precision::bf16_mixed || p == Precision::fp16_mixed;
}
// Optimizer states are fp32 except in pure bf16, where everything is bf16.
inline constexpr std::uint32_t state_bytes(Precision p) { return p == Precision::bf16 ? 2 : 4; }
inline constexpr bool uses_loss_scaling(Precision p) { return p == Precision::fp16_mixed; }

// ------------------------------------------------------------ ModelSpec ----

// A Hugging Face config's rope_scaling: the type and the parameters that
// change RoPE's inverse frequencies (transformers' modeling_rope_utils).
struct RopeScaling {
    std::string type{};  // "": none; "linear", "llama3", or another type as written
    double factor = 1.0;
    double low_freq_factor = 1.0;           // llama3
    double high_freq_factor = 4.0;          // llama3
    std::uint64_t original_context = 8192;  // llama3: original_max_position_embeddings
    bool empty() const { return type.empty(); }
    bool operator==(const RopeScaling&) const = default;
};
// "llama3 factor 8 (low 1, high 4, original context 8192)", "linear factor 2"; "" when none.
std::string to_string(const RopeScaling& r);

struct ModelSpec {
    std::string name;  // preset name, or "custom"
    std::uint64_t vocab = 0;
    std::uint64_t hidden = 0;
    std::uint64_t layers = 0;
    std::uint64_t heads = 0;
    std::uint64_t kv_heads = 0;
    std::uint64_t ffn = 0;
    std::uint64_t max_context = 0;
    double rms_norm_eps = 1e-5;
    double rope_theta = 10000.0;
    // Hugging Face fields beyond the Llama shape (core/hf_config.cpp reads them). The
    // estimator counts each; the trainer refuses a trial that needs one it cannot run
    // (train/io/hf_model.h: trainer_unsupported), naming the field.
    std::uint64_t head_dim_setting = 0;  // head_dim when it is not hidden/heads (Mistral-Nemo); 0: hidden/heads
    bool tied_embeddings = false;        // tie_word_embeddings: the LM head is the embedding matrix
    bool qkv_bias = false;               // biases on q, k, v (attention_bias; always in Qwen2)
    bool o_bias = false;                 // a bias on o (attention_bias in Llama and Mistral)
    bool mlp_bias = false;               // biases on gate, up, down (mlp_bias)
    std::uint64_t sliding_window = 0;    // attention window in tokens; 0: full causal attention
    bool qk_norm = false;                // RMSNorm over each head of q and k before RoPE (Qwen3's q_norm, k_norm)
    RopeScaling rope_scaling{};          // empty: plain RoPE

    // A model with a shape to size; a TrialConfig of settings alone (what an export may be
    // given) has none, and its byte counts would divide by zero heads.
    bool sized() const { return heads != 0; }
    std::uint64_t head_dim() const { return head_dim_setting != 0 ? head_dim_setting : hidden / heads; }
    std::uint64_t q_dim() const { return heads * head_dim(); }
    std::uint64_t kv_dim() const { return kv_heads * head_dim(); }
    std::uint64_t layer_bias_params() const {
        return (qkv_bias ? q_dim() + 2 * kv_dim() : 0) + (o_bias ? hidden : 0) + (mlp_bias ? 2 * ffn + hidden : 0);
    }
    // q, k, v, o + gate, up, down + two RMSNorm weight vectors + biases + the q/k norms' (head_dim) weights.
    std::uint64_t layer_params() const {
        return hidden * q_dim() * 2 + hidden * kv_dim() * 2 + 3 * hidden * ffn + 2 * hidden + layer_bias_params() +
               (qk_norm ? 2 * head_dim() : 0);
    }
    // A layer's vectors: the two norm weights, the biases and the q/k norms (QLoRA keeps them 16-bit).
    std::uint64_t layer_vector_params() const {
        return 2 * hidden + layer_bias_params() + (qk_norm ? 2 * head_dim() : 0);
    }
    std::uint64_t embedding_params() const { return vocab * hidden; }
    std::uint64_t head_params() const {
        return tied_embeddings ? 0 : vocab * hidden;
    }  // tied: shared with the embedding
    // embedding + layers + final norm + head, exactly.
    std::uint64_t param_count() const { return embedding_params() + layers * layer_params() + hidden + head_params(); }
    bool operator==(const ModelSpec&) const = default;
};

// ------------------------------------------------------------- Hardware ----

struct Hardware {
    std::string device;                        // preset name, e.g. "h100-80gb", or "cpu"
    BackendKind backend = BackendKind::cuda;   // cuda or cpu (JSON: "cuda", "cpu")
    std::uint64_t memory_bytes = 0;            // per device
    double peak_flops_half = 0;                // dense bf16/fp16 tensor FLOP/s
    double peak_flops_fp32 = 0;                // dense fp32 FLOP/s
    double hbm_bytes_per_s = 0;                // device memory bandwidth
    double intra_node_bytes_per_s = 0;         // per-GPU link bandwidth inside a node (NVLink, PCIe)
    double inter_node_bytes_per_s = 0;         // per-GPU bandwidth across nodes
    std::uint64_t runtime_overhead_bytes = 0;  // CUDA context + cuBLAS + NCCL, measured per device kind
    // Offload's paths: pinned copies between host and one GPU (PCIe, per direction), and the host
    // memory bandwidth the CPU optimizer's update streams through, shared by the node's ranks.
    double host_link_bytes_per_s = 0;
    double host_memory_bytes_per_s = 0;
    // The fraction of peak_flops_half a 16-bit training step's FLOPs reach on this device, as
    // published for its preset (core/presets.cpp names the source); 0 where none is.
    double training_efficiency = 0;
    std::uint32_t gpus_per_node = 1;
    std::uint32_t nodes = 1;
    bool operator==(const Hardware&) const = default;
};

// ---------------------------------------------------------- TrialConfig ----

struct TrialConfig {
    ModelSpec model;
    Optimizer optimizer = Optimizer::adamw;
    Precision precision = Precision::fp32;
    std::uint32_t zero_stage = 0;
    std::uint32_t grad_accum = 1;
    std::uint32_t micro_batch = 1;
    std::uint32_t context = 128;
    Checkpointing checkpointing = Checkpointing::none;
    std::uint32_t world_size = 1;
    Attention attention = Attention::flash;

    std::uint32_t steps = 6;   // optimizer steps, warmup included
    std::uint32_t warmup = 2;  // steps excluded from throughput
    std::uint64_t seed = 1234;
    double lr = 1e-4;
    double weight_decay = 0.0;   // decoupled; matrices only
    double clip = 1.0;           // global grad-norm clip; 0 disables
    double neftune_alpha = 0.0;  // 0 disables NEFTune

    // Unset means the optimizer's published default (see kernels/math/).
    std::optional<double> beta1;
    std::optional<double> beta2;
    std::optional<double> eps;
    std::uint32_t adam8bit_block = 256;  // bitsandbytes' current block size
    double loss_scale_init = 65536.0;    // fp16 dynamic loss scaling
    std::uint32_t loss_scale_window = 1000;

    std::uint64_t memory_limit = 0;  // allocator limit in bytes per rank; 0 = the device's memory

    // Fine-tuning method (dimensions after schema 3: their defaults stay out of the JSON).
    Method method = Method::full;
    std::uint32_t lora_rank = 16;
    LoraTargets lora_targets = LoraTargets::all_linear;
    std::optional<double> lora_alpha;  // unset: 2 x rank
    Offload offload = Offload::none;
    // Megatron-style tensor parallelism (core/parallel_plan.h): world_size is data-parallel replicas times this.
    std::uint32_t tensor_parallel = 1;
    bool sequence_parallel = false;  // split the residual and norm tensors along the sequence over the tp ranks
    // Pipeline parallelism (core/pipeline_schedule.h): stages of contiguous layers, grad_accum micro-batches
    // per step; with the interleaved schedule each stage holds virtual_stages chunks.
    std::uint32_t pipeline_parallel = 1;
    PipelineSchedule pipeline_schedule = PipelineSchedule::one_f_one_b;
    std::uint32_t virtual_stages = 1;
    PipelineSplit pipeline_split = PipelineSplit::even;
    bool adapters() const { return method != Method::full; }
    double lora_scale() const { return lora_alpha.value_or(2.0 * lora_rank) / lora_rank; }

    bool operator==(const TrialConfig&) const = default;
};

// ------------------------------------------------------- memory records ----

inline std::optional<Component> parse_component(std::string_view t) { return parse_enum(t, kComponents); }

// Bytes per component at the moment of the peak, plus the peak itself.
struct MemoryBreakdown : ComponentBytes {
    std::uint64_t peak = 0;
    std::string peak_phase;  // e.g. "forward-end", "lm-head-backward", "layer-backward", "optimizer-step"

    bool operator==(const MemoryBreakdown&) const = default;
};

// One pipeline stage's memory in an estimate: every rank of the stage holds the same.
struct StageMemory {
    std::uint32_t stage = 0;
    std::uint32_t rank = 0;  // the stage's first rank (core/parallel_plan.h: stages are contiguous ranks)
    std::uint32_t layers = 0;
    MemoryBreakdown memory;
    bool operator==(const StageMemory&) const = default;
};

// What the analytic estimator predicts for one configuration.
struct Estimate {
    MemoryBreakdown memory;             // per rank, on the device: the worst stage's with pipeline parallelism
    std::vector<StageMemory> stages;    // pipeline parallelism: every stage in order; empty without
    MemoryBreakdown host_memory;        // per rank, in host memory (offload); zero without
    std::uint64_t host_node_bytes = 0;  // host_memory.peak times the trial's ranks on one node
    double step_s = 0;
    double tokens_per_s = 0;
    double mfu = 0;
    double pipeline_bubble = 0;  // pipeline parallelism: the schedule's idle share of the stages' time
    bool fits = false;
    // Which limit a configuration that does not fit passes: "device", "host" or "device+host"; "" when it fits.
    std::string limit;
    // Seconds of the speed reference (kernels/speed_reference.h) taken with the
    // probes whose rates priced step_s; 0 for a nominal estimate.
    double speed_reference_s = 0;
    // How a step's time follows the machine's pace: on a machine whose reference
    // ran S times slower, the step takes S^pace_exponent times step_s. 1 (every op
    // slows as the reference GEMM does) until calibration learns otherwise
    // (driver/calibration.h): latency- and link-bound work slows less.
    double pace_exponent = 1;
    bool operator==(const Estimate&) const = default;
};

// What one trial produced. Printed by `tune trial` as its last stdout line.
struct TrialResult {
    TrialStatus status = TrialStatus::pending;
    std::string reason;  // why, for every status but ok
    TrialConfig config;
    MemoryBreakdown memory;  // measured, at the peak (max over ranks)
    std::vector<std::uint64_t> rank_peaks;
    MemoryBreakdown host_memory;                 // the host ledger (offload), the rank with the most; zero without
    std::vector<std::uint64_t> rank_host_peaks;  // empty without offload
    std::optional<Estimate> estimate;
    std::vector<double> step_ms;  // every optimizer step, warmup included
    std::vector<double> losses;   // mean loss over the step's micro-batches, before the update
    double tokens_per_s = 0;      // warmup excluded
    double mfu = 0;
    std::uint64_t comm_bytes = 0;  // bytes moved by collectives per step, rank 0
    double comm_s = 0;
    std::uint64_t oom_requested = 0;  // set when status is oom
    std::uint64_t oom_live = 0;
    // What the machine saw (train/memory/real_memory.h): the process's resident
    // set on a CPU, the device's used bytes on a GPU. Largest over ranks, then per rank.
    std::uint64_t real_peak = 0;  // 0: not measured; on the CPU, less the host ledger
    std::uint64_t baseline = 0;   // before the model's first allocation
    std::int64_t untracked = 0;   // real_peak - baseline - tagged peak
    std::vector<std::uint64_t> rank_real_peaks;
    std::vector<std::uint64_t> rank_baselines;
    std::vector<std::int64_t> rank_untracked;
    StepStatistics step_stats;  // timing noise of the timed steps (rank 0)
    // Seconds of the speed reference run before each timed step: the median
    // over steps, the slowest rank's (it sets the pace); 0: not measured.
    double speed_reference_s = 0;
    // Which attention ran on a GPU: cuDNN's graphs with their calls, or tune's
    // kernels and why (kernels/cuda/cuda_backend.h cuda_attention_path); empty on the CPU.
    std::string attention;
    bool operator==(const TrialResult&) const = default;
};

// ----------------------------------------------------------------- JSON ----
// Strict on read: unknown keys are errors (they are usually typos), missing
// keys take their defaults.

void to_json(nlohmann::json& j, const ModelSpec& m);
void from_json(const nlohmann::json& j, ModelSpec& m);
void to_json(nlohmann::json& j, const Hardware& h);
void from_json(const nlohmann::json& j, Hardware& h);
void to_json(nlohmann::json& j, const TrialConfig& c);
void from_json(const nlohmann::json& j, TrialConfig& c);
void to_json(nlohmann::json& j, const MemoryBreakdown& m);
void from_json(const nlohmann::json& j, MemoryBreakdown& m);
void to_json(nlohmann::json& j, const StageMemory& s);
void from_json(const nlohmann::json& j, StageMemory& s);
void to_json(nlohmann::json& j, const Estimate& e);
void from_json(const nlohmann::json& j, Estimate& e);
void to_json(nlohmann::json& j, const TrialResult& r);
void from_json(const nlohmann::json& j, TrialResult& r);
// The machine's view of a trial's memory (real peak, baseline, untracked: the
// largest over ranks, then per rank), as the result line and the store's
// records write it; an empty object when the trial measured none.
nlohmann::json machine_memory_json(const TrialResult& r);

// 16 lowercase hex digits of FNV-1a 64: stable across runs, compilers and platforms.
std::string stable_hash(std::string_view bytes);

// stable_hash of the canonical JSON (sorted keys,
// shortest round-trip numbers), so equal configs hash equally everywhere.
std::string config_hash(const TrialConfig& c);

// One line for tables and logs: "adamw bf16-mixed z3 ga4 mb1 ctx4096 ckpt=full x8".
std::string summary(const TrialConfig& c);

}  // namespace tune
