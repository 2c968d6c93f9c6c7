#include "exports/megatron_args.h"

#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "core/optimizer_hyperparameters.h"
#include "core/parallel_plan.h"
#include "core/pipeline_split.h"
#include "exports/framework_checkpointing.h"

namespace tune {
namespace {

using Args = std::vector<std::pair<std::string, std::string>>;  // flag, value ("" for a switch)

// Megatron-LM's optimizers are Adam (decoupled weight decay, i.e. AdamW) and SGD; it has no
// adapters (NeMo adds them) and no pure 16-bit states without its precision-aware optimizer.
void refuse_what_it_cannot_run(const TrialConfig& c) {
    if (c.optimizer != Optimizer::adamw)
        throw ExportRefused(fmt::format("{} under Megatron-LM: its --optimizer is adam (AdamW) or sgd; choose adamw",
                                        to_string(c.optimizer)));
    if (c.adapters())
        throw ExportRefused(fmt::format(
            "{} under Megatron-LM: it trains every weight (NeMo adds adapters); choose full", to_string(c.method)));
    // megatron/core/parallel_state.py initialize_model_parallel raises for a virtual pipeline of two stages.
    if (c.pipeline_parallel > 1 && c.pipeline_parallel <= 2 && c.pipeline_schedule == PipelineSchedule::interleaved)
        throw ExportRefused(fmt::format(
            "the interleaved schedule over {} pipeline stages under Megatron-LM: Megatron-Core's "
            "initialize_model_parallel needs more than 2 stages for virtual pipeline stages; choose 1f1b, or "
            "pipeline_parallel 3 or more",
            c.pipeline_parallel));
    if (c.offload == Offload::optimizer_params)
        throw ExportRefused(
            "optimizer+params offload under Megatron-LM: --optimizer-cpu-offload moves the optimizer only; choose "
            "offload optimizer or none");
}

void add_model(Args& a, const ModelSpec& m, const TrialConfig& c, FrameworkExport& e) {
    a.insert(a.end(), {{"--num-layers", std::to_string(m.layers)},
                       {"--hidden-size", std::to_string(m.hidden)},
                       {"--num-attention-heads", std::to_string(m.heads)},
                       {"--ffn-hidden-size", std::to_string(m.ffn)},
                       {"--seq-length", std::to_string(c.context)},
                       {"--max-position-embeddings", std::to_string(m.max_context)},
                       {"--swiglu", ""},
                       {"--normalization", "RMSNorm"},
                       {"--norm-epsilon", fmt::format("{}", m.rms_norm_eps)},
                       {"--position-embedding-type", "rope"},
                       {"--rotary-base", fmt::format("{}", m.rope_theta)},
                       // Megatron pads the vocabulary to this times tp (default 128): 1 keeps tune's padding.
                       {"--make-vocab-size-divisible-by", "1"}});
    if (m.kv_heads != m.heads)
        a.insert(a.end(), {{"--group-query-attention", ""}, {"--num-query-groups", std::to_string(m.kv_heads)}});
    if (m.head_dim_setting != 0) a.emplace_back("--kv-channels", std::to_string(m.head_dim_setting));
    if (!m.tied_embeddings) a.emplace_back("--untie-embeddings-and-output-weights", "");
    if (m.o_bias || m.mlp_bias)
        a.emplace_back("--add-bias-linear", "");
    else
        a.emplace_back("--disable-bias-linear", "");
    if (m.qkv_bias) a.emplace_back("--add-qkv-bias", "");
    if (m.qk_norm) a.emplace_back("--qk-layernorm", "");
    if (!m.rope_scaling.empty())
        e.cannot_express.push_back(fmt::format("rope_scaling {}: set Megatron's RoPE scaling flags for it by hand",
                                               to_string(m.rope_scaling)));
    if (m.sliding_window != 0)
        e.cannot_express.push_back(fmt::format("a sliding window of {} tokens", m.sliding_window));
}

// Pipeline parallelism (megatron/training/arguments.py): the stages, the interleaved schedule's layers per
// virtual stage (Megatron-Core's forward_backward_pipelining_with_interleaving, the table
// core/pipeline_schedule.h follows), and the split's flags that count the embedding or the loss as a layer.
void add_pipeline(Args& a, const TrialConfig& c) {
    if (c.pipeline_parallel <= 1) return;
    a.emplace_back("--pipeline-model-parallel-size", std::to_string(c.pipeline_parallel));
    if (c.pipeline_schedule == PipelineSchedule::interleaved)
        a.emplace_back(
            "--num-layers-per-virtual-pipeline-stage",
            std::to_string(pipeline_counted_layers(static_cast<std::uint32_t>(c.model.layers), c.pipeline_parallel,
                                                   c.virtual_stages, c.pipeline_split)));
    if (split_counts_embedding(c.pipeline_split)) a.emplace_back("--account-for-embedding-in-pipeline-split", "");
    if (split_counts_loss(c.pipeline_split)) a.emplace_back("--account-for-loss-in-pipeline-split", "");
}

// ZeRO 2-3 run under Megatron-FSDP (megatron/training/arguments.py, validate_args).
bool megatron_fsdp(const TrialConfig& c) { return c.zero_stage >= 2; }

// ZeRO-1 is the distributed optimizer; Megatron-FSDP's sharding strategies name every stage. What
// validate_args (megatron/training/arguments.py) asserts of these flags is written with them:
// Megatron-FSDP saves only in its fsdp_dtensor checkpoint format, and --optimizer-cpu-offload runs
// through the precision-aware optimizer's code path (--use-precision-aware-optimizer), which in turn
// needs the distributed optimizer (megatron/core/optimizer/__init__.py, get_megatron_optimizer): the
// FSDP stages have it, since Megatron-FSDP v1 sets it, and offload exists only there (core/validity).
void add_parallelism(Args& a, const TrialConfig& c) {
    a.emplace_back("--tensor-model-parallel-size", std::to_string(c.tensor_parallel));
    if (c.sequence_parallel && c.tensor_parallel > 1) a.emplace_back("--sequence-parallel", "");
    add_pipeline(a, c);
    if (c.zero_stage == 1) a.emplace_back("--use-distributed-optimizer", "");
    if (megatron_fsdp(c))
        a.insert(a.end(),
                 {{"--use-megatron-fsdp", ""},
                  {"--data-parallel-sharding-strategy", c.zero_stage == 2 ? "optim_grads" : "optim_grads_params"},
                  {"--ckpt-format", "fsdp_dtensor"}});
    if (c.offload == Offload::optimizer)
        a.insert(a.end(), {{"--optimizer-cpu-offload", ""},
                           {"--optimizer-offload-fraction", "1.0"},
                           {"--use-precision-aware-optimizer", ""}});
    a.insert(a.end(), {{"--micro-batch-size", std::to_string(c.micro_batch)},
                       {"--global-batch-size",
                        std::to_string(std::uint64_t{c.micro_batch} * c.grad_accum * parallel_plan(c).dp)}});
}

void add_training(Args& a, const TrialConfig& c, FrameworkExport& e) {
    if (c.precision == Precision::bf16_mixed) a.emplace_back("--bf16", "");
    if (c.precision == Precision::fp16_mixed)
        a.insert(a.end(), {{"--fp16", ""},
                           {"--initial-loss-scale", fmt::format("{}", c.loss_scale_init)},
                           {"--loss-scale-window", std::to_string(c.loss_scale_window)}});
    if (c.precision == Precision::bf16)
        e.cannot_express.push_back(
            "pure bf16: Megatron's --bf16 keeps fp32 main weights and states (12 more bytes per parameter than tune "
            "measured) unless its precision-aware optimizer is set up by hand");
    const FrameworkCheckpointing ckpt = framework_checkpointing(c);
    if (!ckpt.note.empty()) e.cannot_express.push_back(ckpt.note);
    if (ckpt.whole_layers)
        a.insert(
            a.end(),
            {{"--recompute-granularity", "full"}, {"--recompute-method", "uniform"}, {"--recompute-num-layers", "1"}});
    if (ckpt.by_op) {
        a.emplace_back("--recompute-granularity", "selective");
        e.cannot_express.push_back(
            "selective-op checkpointing: Megatron's selective recompute reruns core attention only, keeping every "
            "matmul output");
    }
    a.emplace_back("--attention-backend", c.attention == Attention::flash ? "flash" : "unfused");
    const OptimizerHyperparameters h = optimizer_hyperparameters(c);
    a.insert(a.end(), {{"--optimizer", "adam"},
                       {"--lr", fmt::format("{}", h.lr)},
                       {"--lr-decay-style", "constant"},
                       {"--adam-beta1", fmt::format("{}", h.beta1)},
                       {"--adam-beta2", fmt::format("{}", h.beta2)},
                       {"--adam-eps", fmt::format("{}", h.eps)},
                       {"--weight-decay", fmt::format("{}", h.weight_decay)},
                       {"--clip-grad", fmt::format("{}", c.clip)},  // 0 clips nothing, as tune's 0
                       {"--seed", std::to_string(c.seed)}});
}

}  // namespace

FrameworkExport megatron_export(const TrialConfig& c) {
    refuse_what_it_cannot_run(c);
    FrameworkExport e;
    Args args;
    add_model(args, c.model, c, e);
    add_parallelism(args, c);
    add_training(args, c, e);
    // validate_args asserts CUDA_DEVICE_MAX_CONNECTIONS=1 under tensor parallelism on GPUs before
    // Blackwell (one hardware queue runs kernels in launch order, which its overlap of communication
    // with GEMMs relies on), except under Megatron-FSDP, which asserts the variable is not 1.
    const bool one_connection = c.tensor_parallel > 1 && !megatron_fsdp(c);
    std::string cmd = fmt::format("{}torchrun --nnodes 1 --nproc_per_node {} pretrain_gpt.py",
                                  one_connection ? "CUDA_DEVICE_MAX_CONNECTIONS=1 " : "", parallel_plan(c).world());
    for (const auto& [flag, value] : args) cmd += value.empty() ? " \\\n  " + flag : " \\\n  " + flag + " " + value;
    e.body = cmd + "\n";
    e.in_script.push_back(
        "the data and tokenizer: --data-path, --tokenizer-type HuggingFaceTokenizer and --tokenizer-model name yours");
    e.memory_added.push_back(
        "Megatron-LM has no profile in tune: the estimate is tune's engine's, which runs Megatron's tensor-parallel "
        "scheme; Megatron's contiguous gradient buffers and Transformer Engine's workspaces are not counted");
    if (c.neftune_alpha > 0) e.cannot_express.push_back("NEFTune noise: Megatron-LM has no setting for it");
    return e;
}

}  // namespace tune
