// Framework exports: the DeepSpeed JSON, the accelerate FSDP config (YAML),
// the torchrun command line and TrainingArguments carry the configuration's
// fields, say what the framework cannot express and the memory it adds; and
// `tune estimate --framework deepspeed` adds DeepSpeed's fp32 gradient partitions.
#include <catch2/catch.hpp>

#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/presets.h"
#include "search/flat_layout.h"
#include "exports/framework.h"
#include "search/estimate.h"
#include "tests/support/run_command.h"
#include "tests/test_store_support.h"

using namespace tune;

namespace {

TrialConfig llama7b(Optimizer o, Precision p, std::uint32_t zero, Checkpointing ckpt) {
    TrialConfig c;
    c.model = *find_model("llama-7b");
    c.optimizer = o;
    c.precision = p;
    c.zero_stage = zero;
    c.checkpointing = ckpt;
    c.grad_accum = 16;
    c.micro_batch = 2;
    c.context = 2048;
    c.world_size = 8;
    return c;
}

// A small YAML reader for what the exports write: `key: value` lines, nesting by two
// spaces, `#` comments. Fails the test on any other line, so the output stays well formed.
std::map<std::string, std::string> read_yaml(const std::string& text) {
    std::map<std::string, std::string> out;
    std::string section;
    std::istringstream in(text);
    const std::regex line_re(R"(^( {0,2})([A-Za-z_][A-Za-z0-9_]*):(?: (.+))?$)");
    for (std::string line; std::getline(in, line);) {
        if (line.empty() || line[0] == '#') continue;
        std::smatch m;
        INFO(line);
        REQUIRE(std::regex_match(line, m, line_re));
        if (m[1].length() == 0) {
            if (!m[3].matched) section = m[2];
            else {
                section.clear();
                out[m[2]] = m[3];
            }
        } else {
            REQUIRE(!section.empty());
            out[section + "." + std::string(m[2])] = m[3];
        }
    }
    return out;
}

}  // namespace

TEST_CASE("the DeepSpeed JSON carries stage, precision, batch, optimizer and checkpointing", "[exports]") {
    const TrialConfig c = llama7b(Optimizer::adamw, Precision::bf16_mixed, 2, Checkpointing::full);
    const FrameworkExport e = export_config(Framework::deepspeed, c);
    REQUIRE(e.json);
    const auto j = nlohmann::json::parse(e.body);
    CHECK(j["zero_optimization"]["stage"] == 2);
    CHECK(j["bf16"]["enabled"] == true);
    CHECK_FALSE(j.contains("fp16"));
    CHECK(j["gradient_accumulation_steps"] == 16);
    CHECK(j["train_micro_batch_size_per_gpu"] == 2);
    CHECK(j["train_batch_size"] == 2 * 16 * 8);
    CHECK(j["optimizer"]["type"] == "AdamW");
    CHECK(j["activation_checkpointing"].is_object());
    // ZeRO-2 keeps fp32 gradient partitions: 4 bytes per parameter over 8 ranks.
    REQUIRE(!e.memory_added.empty());
    CHECK_THAT(e.memory_added[0], Catch::Contains("fp32 gradient partitions") &&
                                      Catch::Contains(std::to_string(c.model.param_count())));

    const auto fp16 = nlohmann::json::parse(
        export_config(Framework::deepspeed, llama7b(Optimizer::lion, Precision::fp16_mixed, 1, Checkpointing::none)).body);
    CHECK(fp16["fp16"]["enabled"] == true);
    CHECK(fp16["fp16"]["initial_scale_power"] == 16);
    CHECK(fp16["optimizer"]["type"] == "Lion");
    CHECK_FALSE(fp16.contains("activation_checkpointing"));
}

TEST_CASE("each export says what its framework cannot express", "[exports]") {
    const TrialConfig lomo = llama7b(Optimizer::lomo, Precision::bf16, 0, Checkpointing::selective);
    const FrameworkExport ds = export_config(Framework::deepspeed, lomo);
    CHECK_FALSE(nlohmann::json::parse(ds.body).contains("optimizer"));
    std::string all;
    for (const auto& s : ds.cannot_express) all += s + "\n";
    CHECK_THAT(all, Catch::Contains("LOMO") && Catch::Contains("pure bf16") && Catch::Contains("selective"));
    const FrameworkExport fsdp = export_config(Framework::accelerate_fsdp, llama7b(Optimizer::adamw, Precision::bf16_mixed, 1, Checkpointing::none));
    all.clear();
    for (const auto& s : fsdp.cannot_express) all += s + "\n";
    CHECK_THAT(all, Catch::Contains("ZeRO-1"));
    // Rendered: notes beside a JSON body, comments inside YAML.
    const RenderedExport r = render(ds, Framework::deepspeed);
    CHECK_NOTHROW(nlohmann::json::parse(r.out));
    CHECK_THAT(r.notes, Catch::Contains("# cannot express: LOMO"));
}

TEST_CASE("LoRA, QLoRA and the attention implementation are set in the script, and every export says how", "[exports][lora]") {
    TrialConfig q = llama7b(Optimizer::adamw, Precision::bf16_mixed, 3, Checkpointing::full);
    q.method = Method::qlora;
    q.lora_rank = 64;
    q.lora_alpha = 16.0;
    q.lora_targets = LoraTargets::attention;
    for (Framework f : {Framework::deepspeed, Framework::accelerate_fsdp, Framework::torchrun, Framework::hf_trainer}) {
        const FrameworkExport e = export_config(f, q);
        std::string script;
        for (const auto& s : e.in_script) script += s + "\n";
        INFO(to_string(f) << ":\n" << script);
        CHECK_THAT(script, Catch::Contains("attn_implementation=\"flash_attention_2\""));
        CHECK_THAT(script, Catch::Contains("LoraConfig(r=64, lora_alpha=16,") &&
                               Catch::Contains(R"(target_modules=["q_proj", "k_proj", "v_proj", "o_proj"])"));
        CHECK_THAT(script, Catch::Contains("bnb_4bit_quant_type=\"nf4\"") &&
                               Catch::Contains("bnb_4bit_use_double_quant=True") &&
                               Catch::Contains("bnb_4bit_compute_dtype=torch.bfloat16") &&
                               Catch::Contains("bnb_4bit_quant_storage=torch.bfloat16") &&
                               Catch::Contains("use_gradient_checkpointing=True"));
        std::string memory;
        for (const auto& s : e.memory_added) memory += s + "\n";
        CHECK_THAT(memory, Catch::Contains("prepare_model_for_kbit_training"));
        const RenderedExport r = render(e, f);
        CHECK_THAT(r.out + r.notes, Catch::Contains("# in your script: QLoRA base:"));
    }
    // LoRA without sharding: all-linear modules, alpha 2 x rank by default, no 4-bit base.
    TrialConfig l = llama7b(Optimizer::adamw, Precision::fp16_mixed, 0, Checkpointing::none);
    l.method = Method::lora;
    l.lora_rank = 8;
    l.attention = Attention::eager;
    std::string script;
    for (const auto& s : export_config(Framework::hf_trainer, l).in_script) script += s + "\n";
    CHECK_THAT(script, Catch::Contains("lora_alpha=16,") && Catch::Contains(R"("gate_proj", "up_proj", "down_proj"])") &&
                           Catch::Contains("attn_implementation=\"eager\""));
    CHECK_THAT(script, !Catch::Contains("BitsAndBytesConfig"));
    // Full fine-tuning needs only the attention implementation.
    CHECK(export_config(Framework::deepspeed, llama7b(Optimizer::adamw, Precision::bf16_mixed, 2, Checkpointing::full))
              .in_script.size() == 1);
}

TEST_CASE("the accelerate FSDP config is well-formed YAML with its TrainingArguments", "[exports]") {
    const TrialConfig c = llama7b(Optimizer::adam8bit, Precision::bf16_mixed, 3, Checkpointing::full);
    const RenderedExport r = render(export_config(Framework::accelerate_fsdp, c), Framework::accelerate_fsdp);
    const auto y = read_yaml(r.out);
    CHECK(y.at("distributed_type") == "FSDP");
    CHECK(y.at("mixed_precision") == "bf16");
    CHECK(y.at("num_processes") == "8");
    CHECK(y.at("fsdp_config.fsdp_sharding_strategy") == "FULL_SHARD");
    CHECK(y.at("fsdp_config.fsdp_activation_checkpointing") == "true");
    CHECK(y.at("fsdp_config.fsdp_transformer_layer_cls_to_wrap") == "LlamaDecoderLayer");
    CHECK_THAT(r.out, Catch::Contains("#   per_device_train_batch_size: 2") &&
                          Catch::Contains("#   gradient_accumulation_steps: 16") &&
                          Catch::Contains("#   optim: \"adamw_bnb_8bit\"") && Catch::Contains("# memory added: FSDP"));
}

TEST_CASE("torchrun and TrainingArguments carry the same settings", "[exports]") {
    const TrialConfig c = llama7b(Optimizer::lomo, Precision::bf16_mixed, 0, Checkpointing::full);
    const std::string cmd = export_config(Framework::torchrun, c).body;
    CHECK_THAT(cmd, Catch::StartsWith("torchrun --nnodes 1 --nproc_per_node 8 train.py") &&
                        Catch::Contains("--gradient_accumulation_steps 16") &&
                        Catch::Contains("--per_device_train_batch_size 2") && Catch::Contains("--optim lomo") &&
                        Catch::Contains("--bf16") && Catch::Contains("--gradient_checkpointing"));
    const auto args = nlohmann::json::parse(export_config(Framework::hf_trainer, c).body);
    CHECK(args["optim"] == "lomo");
    CHECK(args["gradient_accumulation_steps"] == 16);
    CHECK(args["bf16"] == true);
    CHECK_FALSE(args.contains("deepspeed"));
    const auto z3 = nlohmann::json::parse(
        export_config(Framework::hf_trainer, llama7b(Optimizer::adamw, Precision::bf16_mixed, 3, Checkpointing::none)).body);
    CHECK(z3["deepspeed"] == "ds_config.json");
}

TEST_CASE("tune estimate --framework deepspeed adds 4 bytes per parameter / N under ZeRO-2 and 3", "[exports][cli]") {
    const std::string flags = "estimate --json --model llama-7b --precision bf16-mixed --gpus 8 --context 2048 ";
    for (int zero : {1, 2, 3}) {
        INFO(zero);
        const auto plain = nlohmann::json::parse(test::run_command(std::string(TUNE_BINARY) + " " + flags + "--zero " +
                                                                   std::to_string(zero) + " 2>/dev/null").output);
        const auto ds = nlohmann::json::parse(test::run_command(std::string(TUNE_BINARY) + " " + flags + "--zero " +
                                                                std::to_string(zero) + " --framework deepspeed 2>/dev/null").output);
        const std::uint64_t extra = zero >= 2 ? 4 * find_model("llama-7b")->param_count() / 8 : 0;
        CHECK(ds["memory"]["grads"].get<std::uint64_t>() - plain["memory"]["grads"].get<std::uint64_t>() == extra);
        CHECK(ds["memory"]["peak"].get<std::uint64_t>() - plain["memory"]["peak"].get<std::uint64_t>() == extra);
    }
}

TEST_CASE("with LoRA the DeepSpeed profile's fp32 gradient partitions cover only the adapters", "[exports][lora]") {
    TrialConfig c;
    c.model = *find_model("llama-7b");
    c.precision = Precision::bf16_mixed;
    c.method = Method::lora;
    c.lora_rank = 16;
    c.zero_stage = 2;
    c.world_size = 8;
    EstimateOptions deepspeed;
    deepspeed.fp32_grad_partition_bytes = 4;
    const BufferKind adapters = adapter_buffer(c.model, c.lora_rank, c.lora_targets, c.adam8bit_block);
    const std::uint64_t extra = framework_gradient_bytes(c.model, c, deepspeed);
    CHECK(extra == 4 * adapters.numel * adapters.count / 8);
    CHECK(extra < 4 * c.model.param_count() / 8 / 100);  // the frozen base has no gradients to keep
}

TEST_CASE("tune best --emit and tune export --trial N --emit write the chosen configuration", "[exports][cli]") {
    test::ScratchDir dir;
    std::ofstream(dir.file("s.toml")) << "name = \"e\"\n[model]\npreset = \"llama-7b\"\n[hardware]\ngpus = 8\n"
                                         "device = \"h100-80gb\"\n[space]\noptimizer = [\"adamw\", \"lion\"]\n"
                                         "precision = [\"bf16-mixed\"]\nzero_stage = [2, 3]\ncontext = [2048]\n";
    const std::string db = dir.file("r.db");
    REQUIRE(test::run_tune("sweep --dry-run --no-report --db " + db + " " + dir.file("s.toml")).exit_code == 0);
    const auto out = test::run_command(std::string(TUNE_BINARY) + " best --emit deepspeed --db " + db + " 2>/dev/null");
    REQUIRE(out.exit_code == 0);
    const auto j = nlohmann::json::parse(out.output);
    CHECK(j["bf16"]["enabled"] == true);
    const int stage = j["zero_optimization"]["stage"];
    CHECK((stage == 2 || stage == 3));
    const auto notes = test::run_command(std::string(TUNE_BINARY) + " best --emit deepspeed --db " + db + " 2>&1 >/dev/null");
    CHECK_THAT(notes.output, Catch::Contains("predicted") && Catch::Contains("fp32 gradient partitions"));
    // --sweep-file finds the database the file names; here the file names none, so TUNE_DB does.
    const auto yaml = test::run_command("TUNE_DB=" + db + " " + TUNE_BINARY + " export --trial 1 --emit accelerate-fsdp");
    REQUIRE(yaml.exit_code == 0);
    CHECK(read_yaml(yaml.output).at("distributed_type") == "FSDP");
    CHECK(test::run_tune("export --emit torchrun --db " + db).exit_code == 2);  // --trial is needed
}
