#include "exports/torchtitan_config.h"

#include <array>
#include <cstdint>
#include <sstream>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "core/optimizer_hyperparameters.h"
#include "core/parallel_plan.h"
#include "core/pipeline_split.h"
#include "exports/framework_checkpointing.h"

namespace tune {
namespace {

// torchtitan builds its Llama from a named flavor (torchtitan/models/llama3/__init__.py
// llama3_args): the shapes of Meta's Llama 3 8B, 70B and 405B.
struct Flavor {
    const char* name;
    std::uint64_t hidden, layers, heads, kv_heads, ffn, vocab;
};
constexpr std::array<Flavor, 3> kFlavors{{{"8B", 4096, 32, 32, 8, 14336, 128256},
                                          {"70B", 8192, 80, 64, 8, 28672, 128256},
                                          {"405B", 16384, 126, 128, 8, 53248, 128256}}};

std::string flavor_of(const ModelSpec& m, FrameworkExport& e) {
    for (const Flavor& f : kFlavors)
        if (m.hidden == f.hidden && m.layers == f.layers && m.heads == f.heads && m.kv_heads == f.kv_heads &&
            m.ffn == f.ffn && m.vocab == f.vocab)
            return f.name;
    e.cannot_express.push_back(fmt::format(
        "the model's shape: torchtitan trains a named flavor; register one in torchtitan/models/llama3/__init__.py "
        "(llama3_args) with dim={}, n_layers={}, n_heads={}, n_kv_heads={}, vocab_size={} and an MLP of {}, and "
        "name it in [model] flavor",
        m.hidden, m.layers, m.heads, m.kv_heads, m.vocab, m.ffn));
    return "custom";
}

// Pipeline parallelism (torchtitan/config/configs.py Parallelism, torchtitan/distributed/pipeline_parallel.py
// pipeline_llm): the degree, the schedule (torch.distributed.pipelining's 1F1B or Interleaved1F1B), the
// micro-batch, and the layers of each virtual stage with the first and last stages' "less layers" (both 1 by
// default: the embedding and the head count as a layer) set to tune's split.
void add_pipeline(toml::table& t, const TrialConfig& c) {
    t.insert("pipeline_parallel_degree", static_cast<std::int64_t>(c.pipeline_parallel));
    t.insert("pipeline_parallel_schedule",
             c.pipeline_schedule == PipelineSchedule::interleaved ? "Interleaved1F1B" : "1F1B");
    t.insert("pipeline_parallel_microbatch_size", static_cast<std::int64_t>(c.micro_batch));
    t.insert("pipeline_parallel_layers_per_stage",
             static_cast<std::int64_t>(pipeline_counted_layers(
                 static_cast<std::uint32_t>(c.model.layers), c.pipeline_parallel, c.virtual_stages, c.pipeline_split)));
    t.insert("pipeline_parallel_first_stage_less_layers",
             static_cast<std::int64_t>(split_counts_embedding(c.pipeline_split)));
    t.insert("pipeline_parallel_last_stage_less_layers",
             static_cast<std::int64_t>(split_counts_loss(c.pipeline_split)));
}

// ZeRO-0 is plain replication (DDP); 2 keeps the gathered parameters from forward
// to backward (reshard_after_forward never); 3 reshards after forward. The data-parallel
// degrees are the replicas; tensor parallelism is ParallelismConfig's tensor_parallel_degree
// with enable_sequence_parallel (torchtitan/config/configs.py).
toml::table parallelism(const TrialConfig& c) {
    const bool replicate = c.zero_stage == 0;
    const std::int64_t replicas = parallel_plan(c).dp;
    toml::table t{{"data_parallel_replicate_degree", replicate ? replicas : 1},
                  {"data_parallel_shard_degree", replicate ? 1 : replicas},
                  {"fsdp_reshard_after_forward", c.zero_stage == 2 ? "never" : "always"},
                  {"tensor_parallel_degree", static_cast<std::int64_t>(c.tensor_parallel)}};
    if (c.tensor_parallel > 1) t.insert("enable_sequence_parallel", c.sequence_parallel);
    if (c.pipeline_parallel > 1) add_pipeline(t, c);
    return t;
}

toml::table activation_checkpoint(const TrialConfig& c, FrameworkExport& e) {
    const FrameworkCheckpointing ckpt = framework_checkpointing(c);
    if (!ckpt.note.empty()) e.cannot_express.push_back(ckpt.note);
    // torchtitan's config/job_config.py ActivationCheckpoint: mode, and for "selective"
    // the option "op" (or a layer frequency).
    if (ckpt.by_op) return toml::table{{"mode", "selective"}, {"selective_ac_option", "op"}};
    return toml::table{{"mode", ckpt.whole_layers ? "full" : "none"}};
}

// torchtitan always clips; tune's clip = 0 (none) becomes a norm no gradient reaches.
constexpr double kNeverClips = 1e9;

toml::table training(const TrialConfig& c) {
    // Under pipeline parallelism a step's micro-batches are the local batch the schedule splits.
    const std::int64_t local = c.pipeline_parallel > 1 ? std::int64_t{c.micro_batch} * c.grad_accum : c.micro_batch;
    toml::table t{{"local_batch_size", local},
                  {"global_batch_size", static_cast<std::int64_t>(c.micro_batch) * c.grad_accum * parallel_plan(c).dp},
                  {"seq_len", c.context},
                  {"max_norm", c.clip > 0 ? c.clip : kNeverClips},
                  {"mixed_precision_param", c.precision == Precision::fp32 ? "float32" : "bfloat16"},
                  {"mixed_precision_reduce", "float32"},
                  {"seed", static_cast<std::int64_t>(c.seed)}};
    // torchtitan/config/configs.py Training.enable_cpu_offload: FSDP2's CPUOffloadPolicy, parameters, gradients and
    // optimizer states on the host (the only offload FSDP has: estimate/frameworks/framework_validity).
    if (c.offload == Offload::optimizer_params) t.insert("enable_cpu_offload", true);
    return t;
}

}  // namespace

FrameworkExport torchtitan_export(const TrialConfig& c) {
    FrameworkExport e;
    const OptimizerHyperparameters h = optimizer_hyperparameters(c);
    toml::table job{{"model", toml::table{{"name", "llama3"}, {"flavor", flavor_of(c.model, e)}}},
                    {"optimizer", toml::table{{"name", "AdamW"},
                                              {"lr", h.lr},
                                              {"beta1", h.beta1},
                                              {"beta2", h.beta2},
                                              {"eps", h.eps},
                                              {"weight_decay", h.weight_decay}}},
                    // tune measured a constant rate; torchtitan decays after its warmup.
                    // job_config.py LRScheduler: a decay to min_lr_factor x lr after the warmup;
                    // 1.0 holds the rate constant, as tune ran it.
                    {"lr_scheduler", toml::table{{"warmup_steps", 0}, {"min_lr_factor", 1.0}}},
                    {"training", training(c)},
                    {"parallelism", parallelism(c)},
                    {"activation_checkpoint", activation_checkpoint(c, e)}};
    if (c.attention == Attention::eager)
        e.cannot_express.push_back(
            "eager attention: torchtitan runs scaled_dot_product_attention (flash), which "
            "keeps no (s, s) probabilities");
    if (c.clip == 0)
        e.cannot_express.push_back("no clipping: torchtitan always clips; max_norm is 1e9, which no gradient reaches");
    e.in_script.push_back("the data: [training] dataset and [model] hf_assets_path (the tokenizer) name yours");
    std::ostringstream out;
    out << job << "\n";
    e.body = out.str();
    return e;
}

}  // namespace tune
