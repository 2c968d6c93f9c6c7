// Every Megatron-LM export passes what Megatron-LM asserts of the flags it
// writes: megatron/training/arguments.py's validate_args (read at NVIDIA/Megatron-LM
// d98e8a6), and the checks its optimizer and batch set-up make of the same flags
// (megatron/core/optimizer/__init__.py get_megatron_optimizer, optimizer_config.py
// OptimizerConfig.__post_init__, megatron/core/num_microbatches_calculator.py). The
// assertions are encoded here over a wide space of configurations, since a command
// line Megatron refuses at start-up is an export nobody can run.
#include <catch2/catch.hpp>

#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/presets.h"
#include "core/validity.h"
#include "exports/framework.h"

using namespace tune;

namespace {

// A pretrain_gpt.py command line as Megatron's parser and validate_args see it: the
// environment set before torchrun, the ranks torchrun starts, and each flag with its value
// ("" for a switch).
struct MegatronLine {
    std::map<std::string, std::string> env;
    std::uint64_t ranks = 0;
    std::map<std::string, std::string> flags;

    bool has(const std::string& flag) const { return flags.count(flag) > 0; }
    std::string value(const std::string& flag, const std::string& fallback) const {
        const auto it = flags.find(flag);
        return it == flags.end() ? fallback : it->second;
    }
    std::uint64_t number(const std::string& flag, std::uint64_t fallback) const {
        return has(flag) ? std::stoull(flags.at(flag)) : fallback;
    }
};

MegatronLine parse_line(const std::string& body) {
    std::string joined;
    for (char ch : body) joined += ch == '\\' || ch == '\n' ? ' ' : ch;
    std::istringstream in(joined);
    std::vector<std::string> words;
    for (std::string w; in >> w;) words.push_back(w);
    MegatronLine line;
    std::size_t i = 0;
    for (; i < words.size() && words[i].find('=') != std::string::npos; ++i)
        line.env[words[i].substr(0, words[i].find('='))] = words[i].substr(words[i].find('=') + 1);
    REQUIRE(i < words.size());
    REQUIRE(words[i] == "torchrun");
    for (; i < words.size() && words[i] != "pretrain_gpt.py"; ++i)
        if (words[i] == "--nproc_per_node") line.ranks = std::stoull(words[i + 1]);
    REQUIRE(i < words.size());
    for (++i; i < words.size(); ++i) {
        REQUIRE(words[i].rfind("--", 0) == 0);
        const bool has_value = i + 1 < words.size() && words[i + 1].rfind("--", 0) != 0;
        line.flags[words[i]] = has_value ? words[i + 1] : "";
        if (has_value) ++i;
    }
    return line;
}

// What Megatron-LM refuses of this line, one sentence per assertion it fails, each with where it is.
std::vector<std::string> megatron_refusals(const MegatronLine& a) {
    std::vector<std::string> out;
    const auto refuse = [&](bool fails, const char* why) {
        if (fails) out.emplace_back(why);
    };
    const bool fsdp = a.has("--use-megatron-fsdp");
    // Megatron-FSDP v1 (the default --megatron-fsdp-version) turns the distributed optimizer on.
    const bool distributed_optimizer = a.has("--use-distributed-optimizer") || fsdp;
    const std::uint64_t tp = a.number("--tensor-model-parallel-size", 1);
    const std::string ckpt_format = a.value("--ckpt-format", "torch_dist");
    const std::string optimizer = a.value("--optimizer", "adam");
    const auto env = [&](const std::string& name) -> std::optional<std::string> {
        const auto it = a.env.find(name);
        return it == a.env.end() ? std::nullopt : std::optional(it->second);
    };

    // validate_args
    refuse(tp == 0 || a.ranks % tp != 0, "validate_args: world size is not divisible by total_model_size");
    refuse(a.has("--optimizer-cpu-offload") && !a.has("--use-precision-aware-optimizer"),
           "validate_args: the optimizer cpu offload must be used with --use-precision-aware-optimizer");
    refuse(fsdp && ckpt_format != "fsdp_dtensor",
           "validate_args: Megatron-FSDP requires the fsdp_dtensor checkpointing format");
    refuse(ckpt_format == "fsdp_dtensor" && !fsdp,
           "validate_args: --ckpt-format fsdp_dtensor is only tested with Megatron FSDP");
    refuse(fsdp && optimizer != "adam" && optimizer != "sgd",
           "validate_args: Megatron-FSDP supports only the sgd and adam optimizers");
    refuse(fsdp && env("CUDA_DEVICE_MAX_CONNECTIONS") == "1",
           "validate_args: FSDP requires CUDA_DEVICE_MAX_CONNECTIONS > 1 or unset");
    refuse(tp > 1 && !fsdp && env("CUDA_DEVICE_MAX_CONNECTIONS") != "1",
           "validate_args: tensor parallelism requires CUDA_DEVICE_MAX_CONNECTIONS=1 (before Blackwell)");
    refuse(a.has("--fp16") && a.has("--bf16"), "validate_args: --fp16 and --bf16 together");
    refuse(!a.has("--kv-channels") &&
               a.number("--hidden-size", 0) % std::max<std::uint64_t>(a.number("--num-attention-heads", 1), 1) != 0,
           "validate_args: hidden_size % num_attention_heads without --kv-channels");
    refuse(a.number("--max-position-embeddings", 0) < a.number("--seq-length", 0),
           "validate_args: max_position_embeddings must be at least seq_length");
    refuse(a.value("--recompute-granularity", "") == "selective" && a.has("--recompute-method"),
           "validate_args: recompute method is not supported for selective recomputing granularity");
    for (const char* required : {"--num-layers", "--hidden-size", "--num-attention-heads", "--max-position-embeddings"})
        refuse(!a.has(required), "validate_args: a required argument is missing (_check_arg_is_not_none)");
    refuse(a.has("--lr") && std::stod(a.value("--lr", "0")) < std::stod(a.value("--min-lr", "0")),
           "validate_args: min_lr <= lr");
    refuse(a.number("--micro-batch-size", 0) == 0, "validate_args: micro_batch_size > 0");

    // megatron/core/optimizer/__init__.py get_megatron_optimizer and optimizer_config.py OptimizerConfig
    refuse(a.has("--use-precision-aware-optimizer") && !distributed_optimizer,
           "get_megatron_optimizer: --use-precision-aware-optimizer only supported with distributed optimizer");
    refuse(a.has("--use-precision-aware-optimizer") && optimizer != "adam",
           "OptimizerConfig: --use-precision-aware-optimizer only supported with adam");

    // megatron/core/num_microbatches_calculator.py: whole micro-batches on every data-parallel rank.
    const std::uint64_t dp = tp == 0 ? 0 : a.ranks / tp;
    const std::uint64_t per_step = a.number("--micro-batch-size", 1) * dp;
    refuse(per_step == 0 || a.number("--global-batch-size", 0) % per_step != 0,
           "num_microbatches_calculator: global batch size is not divisible by micro batch size times data "
           "parallel size");
    return out;
}

TrialConfig base_config(const ModelSpec& m) {
    TrialConfig c;
    c.model = m;
    c.context = 2048;
    c.micro_batch = 1;
    c.grad_accum = 4;
    return c;
}

}  // namespace

TEST_CASE("the validation rules this test encodes refuse the lines that broke the Megatron export",
          "[exports][megatron]") {
    const std::string head =
        "torchrun --nnodes 1 --nproc_per_node 8 pretrain_gpt.py --num-layers 2 --hidden-size 64 "
        "--num-attention-heads 4 --max-position-embeddings 128 --seq-length 128 "
        "--micro-batch-size 1 --global-batch-size 8 --tensor-model-parallel-size 1";
    CHECK(megatron_refusals(parse_line(head)).empty());
    const auto refusal = [&](const std::string& extra) {
        const auto why = megatron_refusals(parse_line(head + extra));
        return why.empty() ? std::string() : why.front();
    };
    CHECK_THAT(refusal(" --use-megatron-fsdp --ckpt-format fsdp_dtensor --optimizer-cpu-offload"),
               Catch::Contains("--use-precision-aware-optimizer"));
    CHECK_THAT(refusal(" --use-megatron-fsdp"), Catch::Contains("fsdp_dtensor"));
    CHECK_THAT(refusal(" --use-precision-aware-optimizer"), Catch::Contains("distributed optimizer"));
    CHECK_THAT(megatron_refusals(parse_line("CUDA_DEVICE_MAX_CONNECTIONS=1 " + head +
                                            " --use-megatron-fsdp --ckpt-format fsdp_dtensor"))
                   .front(),
               Catch::Contains("CUDA_DEVICE_MAX_CONNECTIONS > 1"));
}

TEST_CASE("every Megatron-LM export over a wide space passes Megatron-LM's own argument validation",
          "[exports][megatron]") {
    int exported = 0, offloaded = 0, sharded = 0, split = 0;
    std::map<std::string, std::string> refused;  // assertion: the first export that fails it
    for (const char* model : {"llama-7b", "llama-70b", "llama3-8b", "qwen2.5-7b", "qwen3-8b", "tiny-variants"})
        for (Precision p : kPrecisions)
            for (std::uint32_t zero : {0u, 1u, 2u, 3u})
                for (Offload off : kOffloads)
                    for (Checkpointing ckpt : kCheckpointings)
                        for (Attention att : kAttentions)
                            for (std::uint32_t tp : {1u, 2u, 4u, 8u})
                                for (bool sp : {false, true}) {
                                    TrialConfig c = base_config(*find_model(model));
                                    c.context = std::min<std::uint32_t>(2048, c.model.max_context);
                                    c.precision = p, c.zero_stage = zero, c.offload = off;
                                    c.checkpointing = ckpt, c.attention = att;
                                    c.world_size = 8, c.tensor_parallel = tp, c.sequence_parallel = sp;
                                    if (invalid_reason(c)) continue;
                                    FrameworkExport e;
                                    try {
                                        e = export_config(Framework::megatron, c);
                                    } catch (const ExportRefused&) {
                                        continue;
                                    }
                                    ++exported;
                                    offloaded += off != Offload::none;
                                    sharded += zero >= 2;
                                    split += tp > 1;
                                    for (const std::string& why : megatron_refusals(parse_line(e.body)))
                                        refused.emplace(why, summary(c) + "\n" + e.body);
                                }
    // Each assertion an export fails, once, with the first configuration that fails it.
    for (const auto& [why, example] : refused) FAIL_CHECK(why << "; e.g. " << example);
    // The space reaches every flag the assertions concern.
    CHECK(exported > 1000);
    CHECK(offloaded > 0);
    CHECK(sharded > 0);
    CHECK(split > 0);
}
