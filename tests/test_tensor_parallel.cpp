// Tensor and sequence parallelism (core/parallel_plan.h): which splits are
// valid, the model one rank holds, the estimator's memory and saved tensors
// against Korthikanti et al.'s Table 2, the tensor-parallel collectives
// against Megatron's schedule, the exports, and a 70B sweep's front.
#include <catch2/catch.hpp>

#include <map>
#include <string>

#include <toml++/toml.h>
#include <nlohmann/json.hpp>

#include "core/dimensions.h"
#include "core/parallel_plan.h"
#include "core/presets.h"
#include "core/validity.h"
#include "estimate/estimate.h"
#include "estimate/model_states.h"
#include "estimate/tensor_parallel_calls.h"
#include "exports/framework.h"
#include "probe/probes.h"
#include "support/run_command.h"
#include "support/trainer_fixture.h"
#include "train/lora.h"
#include "train/model_state.h"
#include "train/trainer.h"
#include "train/trial.h"

using namespace tune;
using tune::test::run_tune;

namespace {

TrialConfig llama70b(std::uint32_t tp, std::uint32_t world, bool sp = false) {
    TrialConfig c;
    c.model = *find_model("llama-70b");
    c.optimizer = Optimizer::adamw, c.precision = Precision::bf16_mixed;
    c.zero_stage = 1, c.micro_batch = 1, c.context = 4096, c.grad_accum = 1;
    c.world_size = world, c.tensor_parallel = tp, c.sequence_parallel = sp;
    return c;
}

std::map<std::string, std::uint64_t> saved(const TrialConfig& c) {
    std::map<std::string, std::uint64_t> out;
    for (const SavedTensor& t : layer_saved_tensors(c.model, c).view()) out[std::string(t.name)] = t.bytes;
    return out;
}

Hardware a100() { return *find_device("a100-80gb"); }

}  // namespace

TEST_CASE("tensor parallelism must split the heads, the KV heads, the ffn and the world, and says which fails",
          "[tensor-parallel]") {
    TrialConfig c;
    c.model = *find_model("small");  // 8 heads, 4 KV heads, ffn 688
    c.world_size = 4, c.tensor_parallel = 4;
    CHECK_FALSE(invalid_reason(c));
    c.tensor_parallel = 8, c.world_size = 8;  // 8 heads over 8 ranks, each of the 4 KV heads on two
    CHECK_FALSE(invalid_reason(c));
    CHECK(parallel_plan(c).kv_replicas(c.model) == 2);
    const auto refused = [&](std::uint32_t tp, std::uint32_t world, std::string_view says) {
        TrialConfig bad = c;
        bad.tensor_parallel = tp, bad.world_size = world;
        const auto problem = invalid_reason(bad);
        REQUIRE(problem);
        CHECK(problem->kind == "tensor-parallel");
        CHECK_THAT(problem->reason, Catch::Contains(std::string(says)));
    };
    refused(2, 3, "does not divide the world size 3");
    refused(16, 16, "8 attention heads");
    c.model.kv_heads = 8;
    c.model.heads = 24, c.model.hidden = 24 * 32;
    refused(3, 3, "8 KV heads");  // neither divides nor is a multiple
    c.model = *find_model("small");
    c.model.ffn = 690;
    refused(4, 4, "ffn 690");
    c.model = *find_model("small");
    c.tensor_parallel = 1, c.world_size = 1, c.sequence_parallel = true;
    const auto sp_alone = invalid_reason(c);
    REQUIRE(sp_alone);
    CHECK_THAT(sp_alone->reason, Catch::Contains("needs tensor_parallel > 1"));
    c.tensor_parallel = 4, c.world_size = 4, c.context = 130;
    const auto sp_context = invalid_reason(c);
    REQUIRE(sp_context);
    CHECK_THAT(sp_context->reason, Catch::Contains("context 130 is not a multiple of 4"));
}

TEST_CASE("a tensor-parallel rank holds its heads, KV heads, ffn and padded vocabulary, hidden whole",
          "[tensor-parallel]") {
    TrialConfig c = llama70b(8, 8);
    const ModelSpec local = parallel_plan(c).local(c.model);
    CHECK(local.heads == 8);
    CHECK(local.kv_heads == 1);
    CHECK(local.ffn == 28672 / 8);
    CHECK(local.vocab == 32000 / 8);
    CHECK(local.hidden == 8192);
    CHECK(local.head_dim() == 128);
    // A vocabulary that does not divide is padded, and the padding's rows count as parameters.
    c.model.vocab = 32001;
    CHECK(parallel_plan(c).padded_vocab(c.model) == 32008);
    CHECK(parallel_plan(c).local(c.model).vocab == 4001);
    // Megatron's replication of KV heads: at tp 16 two ranks share each of the 8.
    c = llama70b(16, 16);
    CHECK(parallel_plan(c).local(c.model).kv_heads == 1);
    CHECK(parallel_plan(c).kv_replicas(c.model) == 2);
    // tp 1 is the model itself.
    c = llama70b(1, 8);
    CHECK(parallel_plan(c).local(c.model) == c.model);
    CHECK(parallel_plan(llama70b(4, 8)).dp == 2);
}

TEST_CASE("a tensor-parallel rank's states are its local model's, sharded by ZeRO over the dp replicas",
          "[tensor-parallel][estimate]") {
    const Hardware hw = a100();
    for (std::uint32_t zero : {0u, 1u, 3u}) {
        INFO("zero " << zero);
        TrialConfig tp = llama70b(4, 8);
        tp.zero_stage = zero;
        // The same rank as one replica of the local model over the dp group of 2.
        TrialConfig replica = tp;
        replica.model = parallel_plan(tp).local(tp.model);
        replica.tensor_parallel = 1, replica.world_size = 2;
        const StepMemory a = step_memory(tp.model, tp, hw, {});
        const StepMemory b = step_memory(replica.model, replica, hw, {});
        for (Component k : {Component::params, Component::master, Component::grads, Component::optim,
                            Component::activations, Component::workspace})
            CHECK(a.at(Phase::layer_backward)[k] == b.at(Phase::layer_backward)[k]);
        // Without sequence parallelism only the parallel cross-entropy's statistics are new: 3 fp32 per row.
        const std::uint64_t rows = logit_chunk_rows(4096, 32000 / 4);
        CHECK(a.at(Phase::head_backward)[Component::logits] ==
              b.at(Phase::head_backward)[Component::logits] + 3 * round_up(4 * rows, 256));
    }
    // Every rank of tp 8 holds an eighth of the matrices and all of the norms.
    const TrialConfig c = llama70b(8, 8);
    const ModelSpec& m = c.model;
    const std::uint64_t norms = (2 * m.layers + 1) * m.hidden;
    const std::uint64_t local = parallel_plan(c).local(m).param_count();
    // k and v are replicated: their 1 KV head of 8 per rank is an eighth, as 8 divides 8.
    CHECK(local == (m.param_count() - norms) / 8 + norms);
}

TEST_CASE("the estimator's saved tensors per layer map onto Korthikanti et al.'s Table 2 tensor by tensor",
          "[tensor-parallel][estimate]") {
    // Korthikanti et al. 2022, Table 2 and §4.2: which of a GPT block's saved activations tensor
    // parallelism splits (the attention's and MLP's inner tensors), which stay whole on every rank
    // (the LayerNorm inputs, the QKV and MLP inputs), which sequence parallelism then splits (all of
    // them). Their block has dropout masks Llama has none of and a 4h GeLU where Llama's SwiGLU keeps
    // g, u and their product; the norms' statistics they leave out follow their LayerNorm's input.
    enum class Paper { split_by_tp, whole_under_tp };
    const std::map<std::string, std::pair<std::string, Paper>> table{
        {"x", {"attention LayerNorm input", Paper::whole_under_tp}},
        {"rstd1", {"attention LayerNorm statistics", Paper::whole_under_tp}},
        {"n1", {"QKV input", Paper::whole_under_tp}},
        {"q", {"Q of QK^T", Paper::split_by_tp}},
        {"k", {"K of QK^T", Paper::split_by_tp}},
        {"v", {"V", Paper::split_by_tp}},
        {"attention", {"softmax output", Paper::split_by_tp}},
        {"o", {"output projection input", Paper::split_by_tp}},
        {"x2", {"MLP LayerNorm input", Paper::whole_under_tp}},
        {"rstd2", {"MLP LayerNorm statistics", Paper::whole_under_tp}},
        {"n2", {"MLP input", Paper::whole_under_tp}},
        {"g", {"GeLU input (SwiGLU's gate)", Paper::split_by_tp}},
        {"u", {"GeLU input (SwiGLU's up)", Paper::split_by_tp}},
        {"m", {"GeLU output", Paper::split_by_tp}},
    };
    for (Attention attention : kAttentions) {
        TrialConfig whole = llama70b(1, 4);
        whole.attention = attention;
        TrialConfig tp = llama70b(4, 4), sp = llama70b(4, 4, true);
        tp.attention = sp.attention = attention;
        const auto one = saved(whole), split = saved(tp), sequence = saved(sp);
        REQUIRE(one.size() == table.size());
        for (const auto& [name, row] : table) {
            INFO(name << ": " << row.first);
            REQUIRE(one.count(name) == 1);
            if (row.second == Paper::split_by_tp)
                CHECK(split.at(name) * 4 == one.at(name));
            else
                CHECK(split.at(name) == one.at(name));
            CHECK(sequence.at(name) * 4 == one.at(name));  // sequence parallelism: everything by t
        }
        // The splits the estimator states agree with the table.
        for (const SavedTensor& t : layer_saved_tensors(tp.model, tp).view())
            CHECK((t.split == TensorSplit::heads) == (table.at(std::string(t.name)).second == Paper::split_by_tp));
    }
    // Grouped-query attention past its KV heads: tp 16 keeps one of the 8 KV heads per rank.
    const auto one = saved(llama70b(1, 16)), gqa = saved(llama70b(16, 16));
    CHECK(gqa.at("k") * 8 == one.at("k"));
    CHECK(gqa.at("q") * 16 == one.at("q"));
}

TEST_CASE("sequence parallelism splits the residual stream and gathers a region's input while it runs",
          "[tensor-parallel][estimate]") {
    const Hardware hw = a100();
    const TrialConfig off = llama70b(8, 8), on = llama70b(8, 8, true);
    const ActivationSizes a = activation_sizes(off.model, off, hw, {}), b = activation_sizes(on.model, on, hw, {});
    CHECK(b.hidden * 8 == a.hidden);
    CHECK(a.gathered == 0);
    CHECK(b.gathered == 2ull * 4096 * 8192);
    CHECK(b.kept_none < a.kept_none);
    const StepMemory sb = step_memory(on.model, on, hw, {});
    CHECK(sb.at(Phase::forward)[Component::comm] == b.gathered);
    CHECK(sb.at(Phase::layer_backward)[Component::comm] == b.gathered);
}

TEST_CASE("the tensor-parallel collectives move the bytes of Megatron's schedule", "[tensor-parallel][estimate]") {
    for (std::uint32_t t : {2u, 4u, 8u}) {
        INFO("tp " << t);
        TrialConfig c = llama70b(t, t);
        const double L = 80, A = 2.0 * 4096 * 8192, n = t;
        const double all_reduce = 2 * (n - 1) / n, gather = (n - 1) / n;
        const double rows = static_cast<double>(logit_chunk_rows(4096, 32000 / t));
        const double chunks = std::ceil(4096 / rows);
        const double loss = 3 * chunks * 4 * rows * all_reduce, norm = 8 * all_reduce;
        // Per layer two all-reduces forward (after o and down) and two backward (the regions' input
        // gradients); the embedding's forward and the head's dX once each.
        CHECK(tensor_parallel_bytes(tensor_parallel_calls(c.model, c)) ==
              Approx((4 * L + 2) * A * all_reduce + loss + norm));
        // Full checkpointing reruns o's forward and its all-reduce; down's output is not needed again.
        c.checkpointing = Checkpointing::full;
        CHECK(tensor_parallel_bytes(tensor_parallel_calls(c.model, c)) ==
              Approx((5 * L + 2) * A * all_reduce + loss + norm));
        // Sequence parallelism: each all-reduce becomes a gather and a reduce-scatter; backward gathers each
        // region's input again; the norms' weight gradients are summed over tp once a step.
        c = llama70b(t, t, true);
        const double norms = (2 * L + 1) * 8192 * 2 * all_reduce;
        CHECK(tensor_parallel_bytes(tensor_parallel_calls(c.model, c)) ==
              Approx((6 * L + 2 + 4 * L + 2) * A * gather + loss + norms + norm));
        // Accumulation repeats the per-micro-batch calls.
        c.grad_accum = 4;
        const double per_step = norms + norm;
        CHECK(tensor_parallel_bytes(tensor_parallel_calls(c.model, c)) ==
              Approx(4 * ((10 * L + 4) * A * gather + loss) + per_step));
    }
    CHECK(tensor_parallel_calls(llama70b(1, 8).model, llama70b(1, 8)).empty());
}

TEST_CASE("the replicated tensors' gradients each rank computed in part are summed over tp once a step",
          "[tensor-parallel][estimate]") {
    const double L = 80, h = 8192, all_reduce = 2 * 3.0 / 4;
    const auto summed = [](const TrialConfig& c) {
        double bytes = 0;
        for (const TensorParallelCall& call : tensor_parallel_calls(c.model, c))
            if (call.count == 1 && call.bytes > 8) bytes += call.bytes * bus_factor(call.op, call.ranks);
        return bytes;
    };
    // LoRA freezes the norms; each adapted linear has one whole (r, h) tensor: a column-parallel base's A,
    // a row-parallel base's B. ZeRO-1 over two replicas sums each rank's half.
    TrialConfig lora = llama70b(4, 8, true);
    lora.method = Method::lora, lora.lora_rank = 16, lora.lora_targets = LoraTargets::all_linear;
    CHECK(summed(lora) == Approx(L * 7 * 16 * h * 2 / 2 * all_reduce));
    lora.lora_targets = LoraTargets::qv, lora.zero_stage = 0;
    CHECK(summed(lora) == Approx(L * 2 * 16 * h * 2 * all_reduce));
    // Qwen3's q/k norms: one head_dim weight each per layer, seen in part by every rank.
    TrialConfig normed = llama70b(4, 4);
    normed.model.qk_norm = true;
    CHECK(summed(normed) == Approx(L * 2 * 128 * 2 * all_reduce));
    normed.sequence_parallel = true;
    CHECK(summed(normed) == Approx((L * 2 * 128 + (2 * L + 1) * h) * 2 * all_reduce));
    // tp 16 over 8 KV heads: each pair of ranks shares one head's k and v (128 rows each), and sums their
    // gradients over the pair; LoRA's q, v targets share v's B (128, r).
    const auto pairs = [](const TrialConfig& c) {
        double bytes = 0;
        for (const TensorParallelCall& call : tensor_parallel_calls(c.model, c))
            if (call.ranks == 2) bytes += call.count * call.bytes * bus_factor(call.op, call.ranks);
        return bytes;
    };
    TrialConfig shared = llama70b(16, 16);
    CHECK(pairs(shared) == Approx(L * 2 * 128 * h * 2));
    shared.method = Method::lora, shared.lora_rank = 16, shared.lora_targets = LoraTargets::qv;
    CHECK(pairs(shared) == Approx(L * 128 * 16 * 2));
    CHECK(pairs(llama70b(8, 8)) == 0);
}

TEST_CASE("a tensor-parallel step counts each replica's tokens once and MFU over the whole model",
          "[tensor-parallel][estimate]") {
    const Hardware hw = a100();
    const TrialConfig dp8 = llama70b(1, 8), tp8 = llama70b(8, 8);
    const StepTime a = step_time(dp8.model, dp8, hw, {}), b = step_time(tp8.model, tp8, hw, {});
    CHECK(a.tokens_per_s == Approx(8 * 4096 / a.step_s));
    CHECK(b.tokens_per_s == Approx(4096 / b.step_s));
    CHECK(b.model_flops_per_token == a.model_flops_per_token);
    CHECK(b.mfu == Approx(b.model_flops_per_token * b.tokens_per_s / (8 * hw.peak_flops_half)));
    CHECK(b.tensor_comm_s > 0);
    CHECK(a.tensor_comm_s == 0);
    // One replica's eighth of the FLOPs per rank.
    CHECK(b.flops_per_token == Approx(a.flops_per_token / 8).epsilon(0.02));
}

TEST_CASE("the tensor_parallel and sequence_parallel rows keep older configurations' JSON and hashes",
          "[tensor-parallel][dimensions]") {
    TrialConfig c = llama70b(1, 8);
    const nlohmann::json j = c;
    CHECK_FALSE(j.contains("tensor_parallel"));
    CHECK_FALSE(j.contains("sequence_parallel"));
    c.tensor_parallel = 4, c.sequence_parallel = true;
    const nlohmann::json k = c;
    CHECK(k["tensor_parallel"] == 4);
    CHECK(k["sequence_parallel"] == "on");
    CHECK(k.get<TrialConfig>() == c);
    CHECK(config_hash(c) != config_hash(llama70b(1, 8)));
    CHECK(find_dimension("tensor_parallel")->flag == "--tensor-parallel");
    CHECK(find_dimension("sequence_parallel")->flag == "--sequence-parallel");
    CHECK(find_dimension("sequence_parallel")->parse("maybe") == std::nullopt);
}

TEST_CASE("Megatron-LM and torchtitan exports carry the split, and the stacks without tensor parallelism refuse it",
          "[tensor-parallel][exports]") {
    TrialConfig c = llama70b(4, 8, true);
    c.grad_accum = 8;
    const std::string megatron = export_config(Framework::megatron, c).body;
    for (const char* arg : {"--tensor-model-parallel-size 4", "--sequence-parallel", "--use-distributed-optimizer",
                            "--global-batch-size 16", "--group-query-attention", "--num-query-groups 8",
                            "--micro-batch-size 1", "--bf16", "--make-vocab-size-divisible-by 1"})
        CHECK_THAT(megatron, Catch::Contains(arg));
    c.sequence_parallel = false, c.zero_stage = 3;
    CHECK_THAT(export_config(Framework::megatron, c).body,
               !Catch::Contains("--sequence-parallel") && Catch::Contains("optim_grads_params"));
    const toml::table titan = toml::parse(export_config(Framework::torchtitan, c).body);
    CHECK(titan["parallelism"]["tensor_parallel_degree"].value<std::int64_t>() == 4);
    CHECK(titan["parallelism"]["enable_sequence_parallel"].value<bool>() == false);
    CHECK(titan["parallelism"]["data_parallel_shard_degree"].value<std::int64_t>() == 2);
    CHECK(titan["training"]["global_batch_size"].value<std::int64_t>() == 16);
    for (Framework f : {Framework::deepspeed, Framework::hf_trainer, Framework::torchrun, Framework::litgpt})
        CHECK_THROWS_WITH(export_config(f, c), Catch::Contains("no tensor parallelism for training"));
    // The way out it names is an export target (`tune export` takes --emit, its --format is csv or json).
    CHECK_THROWS_WITH(export_config(Framework::deepspeed, c), Catch::Contains("(--emit megatron)"));
    CHECK(parse_framework("megatron"));
    CHECK_THROWS_WITH(export_config(Framework::accelerate_fsdp, c), Catch::Contains("tp_plan"));
    c.optimizer = Optimizer::lion;
    CHECK_THROWS_WITH(export_config(Framework::megatron, c), Catch::Contains("adam (AdamW) or sgd"));
}

TEST_CASE("a tensor-parallel rank starts from its shard of the whole model's base and adapters",
          "[tensor-parallel][lora]") {
    // QLoRA quantizes the base from these values and LoRA's A starts from them: each rank's element is the
    // whole model's at the element its shard holds, whatever the split (rows, columns, or whole).
    TrialConfig c;
    c.model = *find_model("small");
    c.world_size = 2, c.tensor_parallel = 2;
    c.method = Method::lora, c.lora_rank = 4;
    const ModelSpec local = parallel_plan(c).local(c.model);
    const train::ParamLayout mine = train::make_param_layout(local, 1, c.adam8bit_block),
                             all = train::make_param_layout(c.model, 1, c.adam8bit_block);
    const train::LoraSpec adapters = train::make_lora_spec(c);
    const train::ParamLayout all_adapters =
        train::make_adapter_layout(c.model, c.lora_rank, c.lora_targets, 1, c.adam8bit_block);
    const auto same = [](const train::HostParams& part, const train::HostParams& whole,
                         const train::ParamLayout& layout, const train::LayoutSource& from) {
        std::size_t compared = 0, differ = 0;
        for (std::size_t i = 0; i < layout.buffers(); ++i)
            for (std::size_t t = 0; t < layout.flat(i).tensors.size(); ++t) {
                const train::TensorView& v = layout.flat(i).tensors[t];
                const train::TensorSource& s = from[i][t];
                for (std::int64_t e = 0; e < v.numel(); ++e) {
                    const std::int64_t row = s.row_begin + e / v.cols, col = s.col_begin + e % v.cols;
                    if (row >= s.rows) continue;  // the vocabulary's padding
                    ++compared;
                    differ += part[i][v.offset + e] != whole[i][s.offset + row * s.cols + col] ? 1 : 0;
                }
            }
        CHECK(compared > 0);
        return differ;
    };
    for (std::uint32_t rank : {0u, 1u}) {
        INFO("tensor-parallel rank " << rank);
        const train::LayoutSource base = train::tensor_parallel_source(c.model, mine, {rank, rank}, c.adam8bit_block);
        CHECK(same(train::random_init(mine, c.seed, 0.02, &base), train::random_init(all, c.seed), mine, base) == 0);
        const train::LayoutSource lora = train::adapter_parallel_source(c, adapters.layout, {rank, rank});
        CHECK(same(train::lora_init(adapters.layout, c.seed, &lora), train::lora_init(all_adapters, c.seed),
                   adapters.layout, lora) == 0);
        // Without the source a rank draws its own values, not its shard's.
        CHECK(same(train::random_init(mine, c.seed), train::random_init(all, c.seed), mine, base) > 0);
    }
    // One KV head on both ranks: each holds the whole k and v, and every other tensor's shard.
    c.model.kv_heads = 1;
    const ModelSpec one_kv = parallel_plan(c).local(c.model);
    const train::ParamLayout kv_mine = train::make_param_layout(one_kv, 1, c.adam8bit_block),
                             kv_all = train::make_param_layout(c.model, 1, c.adam8bit_block);
    for (std::uint32_t rank : {0u, 1u}) {
        const train::LayoutSource base = train::tensor_parallel_source(c.model, kv_mine, {rank, 0}, c.adam8bit_block);
        CHECK(same(train::random_init(kv_mine, c.seed, 0.02, &base), train::random_init(kv_all, c.seed), kv_mine,
                   base) == 0);
        CHECK(base[0][kv_mine.index(train::LayerTensor::k)].row_begin == 0);
        CHECK(base[0][kv_mine.index(train::LayerTensor::q)].row_begin == rank * 128);
    }
    // q's adapters: A (r, h) whole, B (q / 2, r) by rows; o's: A (r, q / 2) by columns, B (h, r) whole.
    CHECK(adapters.layout.layer.tensors[0].cols == 256);
    CHECK(adapters.layout.layer.tensors[1].rows == 128);
    CHECK(adapters.layout.layer.tensors[6].cols == 128);
    CHECK(adapters.layout.layer.tensors[7].rows == 256);
}

TEST_CASE("a tensor-parallel trial refuses whole Hugging Face weights and PEFT adapters, naming the flag",
          "[tensor-parallel][lora]") {
    TrialConfig c;
    c.model = *find_model("tiny");
    c.world_size = 2, c.tensor_parallel = 2, c.method = Method::lora, c.lora_rank = 4;
    c.micro_batch = 1, c.context = 16, c.steps = 1;
    train::TrialOptions o = test::quiet_trial();
    o.save_adapter_dir = "adapter-out";
    train::SingleRankComm one;  // refused before the communicator is asked for its ranks
    const TrialResult r = train::run_trial(c, o, one);
    CHECK(r.status == TrialStatus::invalid);
    CHECK_THAT(r.reason, Catch::Contains("--save-adapter") && Catch::Contains("tensor_parallel 1"));
}

TEST_CASE("a Llama-2-70B sweep on 8 x A100-80GB offers dp x tp, and tensor parallelism leads its front",
          "[tensor-parallel][cli][estimate]") {
    const auto r = run_tune(std::string("estimate ") + TUNE_SOURCE_DIR + "/sweeps/llama70b-a100x8-tp.toml --json");
    REQUIRE(r.exit_code == 0);
    const auto j = nlohmann::json::parse(r.output);
    CHECK(j["invalid"] == 0);
    const auto& front = j["front"];
    REQUIRE(front.size() > 1);
    double fastest = 0, fastest_tp1 = 0;
    std::uint32_t fastest_tp = 0;
    for (const auto& e : front) {
        const auto tp = e["config"].value("tensor_parallel", 1u);
        const double tokens = e["time"]["tokens_per_s"].get<double>();
        if (tokens > fastest) fastest = tokens, fastest_tp = tp;
        if (tp == 1) fastest_tp1 = std::max(fastest_tp1, tokens);
    }
    CHECK(fastest_tp > 1);
    CHECK(fastest > fastest_tp1);
    // A tp shape the node cannot hold is refused by the sweep, naming the node.
    const auto bad = run_tune("estimate --model llama-70b --device a100-80gb --gpus 8 --tensor-parallel 3");
    CHECK(bad.exit_code != 0);
    CHECK_THAT(bad.output, Catch::Contains("tensor_parallel 3"));
}

TEST_CASE("a tensor-parallel sweep probes its group's collectives, and the step prices them at the probed rates",
          "[tensor-parallel][probe][estimate]") {
    TrialConfig c;
    c.model = *find_model("small");  // 8 heads, 4 KV heads
    c.precision = Precision::bf16_mixed, c.context = 128, c.micro_batch = 2;
    c.world_size = 2, c.tensor_parallel = 2;
    const ProbedRates plan = probe::plan_probes(c.model, {c});
    // dp = 1: nothing of ZeRO's; the tp group's at 2 ranks, the activation among the sizes.
    const double activation = 2.0 * 2 * 128 * c.model.hidden;
    bool found = false;
    for (const CollectiveRate& r : plan.collectives) {
        CHECK(r.ranks == 2);
        found = found || (r.op == Collective::all_reduce && static_cast<double>(r.bytes) == activation);
    }
    CHECK(found);
    // Priced at the plan's rates once measured: every probe here moves a byte per nanosecond of bus.
    ProbedRates measured = plan;
    for (CollectiveRate& r : measured.collectives) r.bus_bytes_per_s = 1e9;
    EstimateOptions o;
    o.probed = std::make_shared<const ProbedRates>(measured);
    const StepTime t = step_time(c.model, c, *find_device("h100-80gb"), o);
    const double bus = tensor_parallel_bytes(tensor_parallel_calls(c.model, c));
    CHECK(t.tensor_comm_s == Approx(bus / 1e9));
}
