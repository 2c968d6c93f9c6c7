// Framework exports: the DeepSpeed JSON, the accelerate config (YAML, FSDP2
// and FSDP1), the torchrun command line and TrainingArguments carry the
// configuration's fields and every hyperparameter, keep to the frameworks'
// schemas (tests/fixtures/framework_schemas.json, with sources), refuse what
// the framework cannot run, say what it cannot express and the memory it
// adds; and `tune estimate --framework deepspeed` adds DeepSpeed's fp32
// gradient partitions.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/presets.h"
#include "estimate/estimate.h"
#include "estimate/flat_layout.h"
#include "exports/framework.h"
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

// The YAML as PyYAML reads it (accelerate's ClusterConfig.from_yaml_file uses
// yaml.safe_load), as JSON: an unquoted `no` comes back false, as it would there.
nlohmann::json yaml_json(const std::string& text) {
    test::ScratchDir dir;
    std::ofstream(dir.file("c.yaml")) << text;
    const auto r =
        test::run_command("python3 -c 'import json, sys, yaml; print(json.dumps(yaml.safe_load(sys.stdin)))' < " +
                          dir.file("c.yaml") + " 2>&1");
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    return nlohmann::json::parse(r.output);
}

// The database of an estimate-only sweep of Llama-7B on 8 H100s named `name` over `space`
// ([space] lines), in `dir`.
std::string dry_run_db(const test::ScratchDir& dir, const std::string& name, const std::string& space) {
    std::ofstream(dir.file("s.toml")) << "name = \"" << name << "\"\n[model]\npreset = \"llama-7b\"\n[hardware]\n"
                                      << "gpus = 8\ndevice = \"h100-80gb\"\n[space]\n"
                                      << space << "context = [2048]\n";
    const std::string db = dir.file("r.db");
    REQUIRE(test::run_tune("sweep --dry-run --no-report --db " + db + " " + dir.file("s.toml")).exit_code == 0);
    return db;
}

std::string joined(const std::vector<std::string>& lines) {
    std::string out;
    for (const auto& s : lines) out += s + "\n";
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
    // ZeRO-2 flattens its gradient partition and casts it to fp32 at the step: 2 + 4 bytes a parameter over 8 ranks.
    REQUIRE(!e.memory_added.empty());
    CHECK_THAT(e.memory_added[0], Catch::Contains("fp32 cast") &&
                                      Catch::Contains(std::to_string((c.model.param_count() + 7) / 8) + " elements"));
    // The contiguous gradient bucket the profile adds, with its size.
    REQUIRE(e.memory_added.size() >= 2);
    CHECK_THAT(e.memory_added[1], Catch::Contains("contiguous gradient bucket") && Catch::Contains("953.67 MiB"));

    const auto fp16 = nlohmann::json::parse(
        export_config(Framework::deepspeed, llama7b(Optimizer::lion, Precision::fp16_mixed, 1, Checkpointing::none))
            .body);
    CHECK(fp16["fp16"]["enabled"] == true);
    CHECK(fp16["fp16"]["initial_scale_power"] == 16);
    CHECK(fp16["optimizer"]["type"] == "Lion");
    CHECK_FALSE(fp16.contains("activation_checkpointing"));
}

TEST_CASE("each export says what its framework cannot express", "[exports]") {
    const TrialConfig adafactor = llama7b(Optimizer::adafactor, Precision::bf16, 0, Checkpointing::selective);
    const FrameworkExport ds = export_config(Framework::deepspeed, adafactor);
    CHECK_FALSE(nlohmann::json::parse(ds.body).contains("optimizer"));
    std::string all;
    for (const auto& s : ds.cannot_express) all += s + "\n";
    CHECK_THAT(all, Catch::Contains("pure bf16 at ZeRO-0") && Catch::Contains("selective"));
    // ZeRO-1 is no FSDP mode: refused with the profile's reason (estimate/frameworks/framework_validity), in both
    // versions.
    for (Framework f : {Framework::accelerate_fsdp, Framework::accelerate_fsdp1})
        CHECK_THROWS_WITH(export_config(f, llama7b(Optimizer::adamw, Precision::bf16_mixed, 1, Checkpointing::none)),
                          Catch::Contains("ZeRO-1 under accelerate-fsdp: FSDP has no mode"));
    // Rendered: notes beside a JSON body, comments inside YAML.
    const RenderedExport r = render(ds, Framework::deepspeed);
    CHECK_NOTHROW(nlohmann::json::parse(r.out));
    CHECK_THAT(r.notes, Catch::Contains("# cannot express: pure bf16 at ZeRO-0"));
}

TEST_CASE("LoRA, QLoRA and the attention implementation are set in the script, and every export says how",
          "[exports][lora]") {
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
        // ZeRO-3 and FSDP shard the 4-bit weights with the rest, stored in the dtype AMP keeps parameters in
        // (fp32), with no fp32 upcast of the norms.
        CHECK_THAT(script, Catch::Contains("bnb_4bit_quant_type=\"nf4\"") &&
                               Catch::Contains("bnb_4bit_use_double_quant=True") &&
                               Catch::Contains("bnb_4bit_compute_dtype=torch.bfloat16") &&
                               Catch::Contains("bnb_4bit_quant_storage=torch.float32") &&
                               Catch::Contains("do not call peft.prepare_model_for_kbit_training"));
        CHECK_THAT(joined(e.memory_added), !Catch::Contains("prepare_model_for_kbit_training casts"));
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
    CHECK_THAT(script, Catch::Contains("lora_alpha=16,") &&
                           Catch::Contains(R"("gate_proj", "up_proj", "down_proj"])") &&
                           Catch::Contains("attn_implementation=\"eager\""));
    CHECK_THAT(script, !Catch::Contains("BitsAndBytesConfig"));
    // Full fine-tuning needs only the attention implementation.
    CHECK(export_config(Framework::deepspeed, llama7b(Optimizer::adamw, Precision::bf16_mixed, 2, Checkpointing::none))
              .in_script.size() == 1);
}

TEST_CASE("the accelerate config is YAML that loads with its TrainingArguments: FSDP2, FSDP1 on request", "[exports]") {
    const TrialConfig c = llama7b(Optimizer::adam8bit, Precision::bf16_mixed, 3, Checkpointing::full);
    const RenderedExport r = render(export_config(Framework::accelerate_fsdp, c), Framework::accelerate_fsdp);
    const auto y = yaml_json(r.out);
    CHECK(y["distributed_type"] == "FSDP");
    CHECK(y["mixed_precision"] == "bf16");
    CHECK(y["num_processes"] == 8);
    CHECK(y["fsdp_config"]["fsdp_version"] == 2);
    CHECK(y["fsdp_config"]["fsdp_reshard_after_forward"] == true);
    CHECK_FALSE(y["fsdp_config"].contains("fsdp_sharding_strategy"));  // FSDP1's name
    CHECK(y["fsdp_config"]["fsdp_activation_checkpointing"] == true);
    CHECK(y["fsdp_config"]["fsdp_transformer_layer_cls_to_wrap"] == "LlamaDecoderLayer");
    CHECK_THAT(r.out, Catch::Contains("#   per_device_train_batch_size: 2") &&
                          Catch::Contains("#   gradient_accumulation_steps: 16") &&
                          Catch::Contains("#   optim: \"adamw_bnb_8bit\"") &&
                          Catch::Contains("# in your script: load the model in fp32"));
    // ZeRO-2 keeps the gathered parameters to backward, beside fp32 shards; FSDP1 names its strategies.
    const FrameworkExport z2 = export_config(Framework::accelerate_fsdp,
                                             llama7b(Optimizer::adamw, Precision::bf16_mixed, 2, Checkpointing::none));
    CHECK(yaml_json(z2.body)["fsdp_config"]["fsdp_reshard_after_forward"] == false);
    CHECK_THAT(render(z2, Framework::accelerate_fsdp).out, Catch::Contains("# memory added: SHARD_GRAD_OP"));
    const auto v1 = yaml_json(export_config(Framework::accelerate_fsdp1, c).body);
    CHECK(v1["fsdp_config"]["fsdp_version"] == 1);
    CHECK(v1["fsdp_config"]["fsdp_sharding_strategy"] == "FULL_SHARD");
    // ZeRO-0 is data parallelism, which DDP runs under either FSDP version, as the profile predicts it.
    const TrialConfig z0 = llama7b(Optimizer::adamw, Precision::bf16_mixed, 0, Checkpointing::full);
    for (Framework f : {Framework::accelerate_fsdp, Framework::accelerate_fsdp1}) {
        const auto ddp = yaml_json(export_config(f, z0).body);
        CHECK(ddp["distributed_type"] == "MULTI_GPU");
        CHECK_FALSE(ddp.contains("fsdp_config"));
    }
}

TEST_CASE("fp32's mixed_precision loads as the string no, not as YAML's false", "[exports]") {
    for (Framework f : {Framework::accelerate_fsdp, Framework::accelerate_fsdp1}) {
        const auto y =
            yaml_json(export_config(f, llama7b(Optimizer::adamw, Precision::fp32, 3, Checkpointing::none)).body);
        CHECK(y["mixed_precision"] == "no");  // accelerate calls .lower() on it
    }
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
        export_config(Framework::hf_trainer, llama7b(Optimizer::adamw, Precision::bf16_mixed, 3, Checkpointing::none))
            .body);
    CHECK(z3["deepspeed"] == "ds_config.json");
}

TEST_CASE("optim=adamw_torch's foreach square roots are in the notes where the stack keeps AdamW on the device",
          "[exports]") {
    TrialConfig c = llama7b(Optimizer::adamw, Precision::bf16_mixed, 0, Checkpointing::full);
    // 6.74B fp32 second moments, padded per flat buffer: 25.10 GiB a rank without sharding.
    for (Framework f : {Framework::hf_trainer, Framework::torchrun, Framework::accelerate_fsdp})
        CHECK_THAT(joined(export_config(f, c).memory_added),
                   Catch::Contains("AdamW's foreach step") && Catch::Contains("25.10 GiB"));
    c.zero_stage = 3;  // FSDP shards them; HF Trainer hands ZeRO to DeepSpeed's FusedAdam
    CHECK_THAT(joined(export_config(Framework::accelerate_fsdp, c).memory_added), Catch::Contains("3.14 GiB"));
    CHECK_THAT(joined(export_config(Framework::hf_trainer, c).memory_added), !Catch::Contains("foreach"));
    CHECK_THAT(joined(export_config(Framework::deepspeed, c).memory_added), !Catch::Contains("foreach"));
    // FSDP1 under LoRA passes FlatParameters, which the optimizer loops over.
    c.method = Method::lora;
    CHECK_THAT(joined(export_config(Framework::accelerate_fsdp1, c).memory_added), !Catch::Contains("foreach"));
    CHECK_THAT(joined(export_config(Framework::accelerate_fsdp, c).memory_added), Catch::Contains("foreach"));
}

TEST_CASE("tune estimate --framework deepspeed adds the step's flattened partition and fp32 cast at ZeRO 1-3",
          "[exports][cli]") {
    const std::string flags = "estimate --json --model llama-7b --precision bf16-mixed --gpus 8 --context 2048 ";
    for (int zero : {1, 2, 3}) {
        INFO(zero);
        const auto plain = nlohmann::json::parse(test::run_command(std::string(TUNE_BINARY) + " " + flags + "--zero " +
                                                                   std::to_string(zero) + " 2>/dev/null")
                                                     .output);
        const auto ds =
            nlohmann::json::parse(test::run_command(std::string(TUNE_BINARY) + " " + flags + "--zero " +
                                                    std::to_string(zero) + " --framework deepspeed 2>/dev/null")
                                      .output);
        // Our engine's estimate is the same; the framework's views add 2 + 4 bytes a parameter over 8 ranks.
        CHECK(ds["memory"]["peak"] == plain["memory"]["peak"]);
        const std::uint64_t extra = 6 * ((find_model("llama-7b")->param_count() + 7) / 8);
        const auto& terms = ds["memory"]["views"]["terms"];
        // transformers' two, the partition and the gradient bucket; at ZeRO-3 also the prefetched and the
        // persistent parameters
        REQUIRE(terms.size() == (zero == 3 ? 6u : 4u));
        CHECK(terms[2]["bytes"].get<std::uint64_t>() == extra);
        CHECK(terms[3]["bytes"].get<std::uint64_t>() == 2ULL * 500'000'000);
        CHECK(ds["memory"]["views"]["allocated"].get<std::uint64_t>() >
              plain["memory"]["views"]["allocated"].get<std::uint64_t>());
    }
}

TEST_CASE("with LoRA the DeepSpeed profile's gradient partitions cover only the adapters", "[exports][lora]") {
    TrialConfig c;
    c.model = *find_model("llama-7b");
    c.precision = Precision::bf16_mixed;
    c.method = Method::lora;
    c.lora_rank = 16;
    c.zero_stage = 2;
    c.world_size = 8;
    const BufferKind adapters = adapter_buffer(c.model, c.lora_rank, c.lora_targets, c.adam8bit_block);
    const auto extra = static_cast<std::uint64_t>(deepspeed_gradient_term(c).bytes);
    CHECK(extra == 6 * ((adapters.numel * adapters.count + 7) / 8));
    CHECK(extra < 6 * c.model.param_count() / 8 / 100);  // the frozen base has no gradients to keep
}

TEST_CASE("tune best --emit and tune export --trial N --emit write the chosen configuration", "[exports][cli]") {
    test::ScratchDir dir;
    const std::string db =
        dry_run_db(dir, "e", "optimizer = [\"adamw\", \"lion\"]\nprecision = [\"bf16-mixed\"]\nzero_stage = [2, 3]\n");
    const auto out = test::run_command(std::string(TUNE_BINARY) + " best --emit deepspeed --db " + db + " 2>/dev/null");
    REQUIRE(out.exit_code == 0);
    const auto j = nlohmann::json::parse(out.output);
    CHECK(j["bf16"]["enabled"] == true);
    const int stage = j["zero_optimization"]["stage"];
    CHECK((stage == 2 || stage == 3));
    const auto notes =
        test::run_command(std::string(TUNE_BINARY) + " best --emit deepspeed --db " + db + " 2>&1 >/dev/null");
    CHECK_THAT(notes.output, Catch::Contains("predicted") && Catch::Contains("fp32 cast"));
    // --sweep-file finds the database the file names; here the file names none, so TUNE_DB does.
    const auto yaml =
        test::run_command("TUNE_DB=" + db + " " + TUNE_BINARY + " export --trial 1 --emit accelerate-fsdp");
    REQUIRE(yaml.exit_code == 0);
    CHECK(yaml_json(yaml.output)["distributed_type"] == "FSDP");
    CHECK(test::run_tune("export --emit torchrun --db " + db).exit_code == 2);  // --trial is needed
}

TEST_CASE("8-bit Adam and Adafactor under ZeRO come from the script, with DeepSpeed's untested-optimizer flag",
          "[exports]") {
    for (Optimizer o : {Optimizer::adam8bit, Optimizer::adafactor}) {
        for (std::uint32_t zero : {0u, 1u, 3u}) {
            INFO(to_string(o) << " ZeRO-" << zero);
            const FrameworkExport e =
                export_config(Framework::deepspeed, llama7b(o, Precision::bf16_mixed, zero, Checkpointing::none));
            const auto j = nlohmann::json::parse(e.body);
            CHECK_FALSE(j.contains("optimizer"));
            CHECK(j.value("zero_allow_untested_optimizer", false) == (zero > 0));
            CHECK_THAT(joined(e.in_script), Catch::Contains("deepspeed.initialize(model=model, optimizer=optimizer"));
        }
    }
    const FrameworkExport a8 = export_config(
        Framework::deepspeed, llama7b(Optimizer::adam8bit, Precision::bf16_mixed, 2, Checkpointing::none));
    CHECK_THAT(joined(a8.in_script), Catch::Contains("bitsandbytes.optim.AdamW8bit(model.parameters(), lr=0.0001, "
                                                     "betas=(0.9, 0.999), eps=1e-08"));
    // Adafactor over ZeRO's flat partitions is another optimizer: said, with its memory.
    const FrameworkExport af = export_config(
        Framework::deepspeed, llama7b(Optimizer::adafactor, Precision::bf16_mixed, 2, Checkpointing::none));
    CHECK_THAT(joined(af.cannot_express), Catch::Contains("unfactored"));
    CHECK_THAT(joined(af.memory_added), Catch::Contains("4 bytes per parameter / N"));
    // HF Trainer and torchrun run ZeRO through the ds_config.json their `deepspeed` argument names: that is
    // where the script's setting goes, not something they cannot express; what DeepSpeed's engine makes
    // of Adafactor holds there as in DeepSpeed's own export. Nor is the context, which the script's
    // tokenization sets, nor torchrun's train.py, which stands for the script.
    for (Framework f : {Framework::hf_trainer, Framework::torchrun}) {
        INFO(to_string(f));
        const TrialConfig adamw = llama7b(Optimizer::adamw, Precision::bf16_mixed, 3, Checkpointing::none);
        const FrameworkExport sharded = export_config(f, adamw);
        CHECK(sharded.cannot_express.empty());
        CHECK_THAT(joined(sharded.in_script), Catch::Contains("ZeRO-3: the Trainer does it through DeepSpeed") &&
                                                  Catch::Contains("context 2048: set by your tokenization"));
        CHECK_THAT(joined(export_config(f, llama7b(Optimizer::adafactor, Precision::bf16_mixed, 2, Checkpointing::none))
                              .cannot_express),
                   Catch::Contains("Adafactor under ZeRO") && Catch::Contains("unfactored"));
    }
}

TEST_CASE("every hyperparameter tune ran is written: Lion's betas, eps, the constant rate, the loss-scale policy",
          "[exports]") {
    const TrialConfig lion = llama7b(Optimizer::lion, Precision::fp16_mixed, 1, Checkpointing::none);
    const auto ds = nlohmann::json::parse(export_config(Framework::deepspeed, lion).body);
    CHECK(ds["optimizer"]["params"]["betas"] == nlohmann::json::array({0.9, 0.99}));  // DeepSpeed's Lion: 0.999
    CHECK(ds["optimizer"]["params"]["weight_decay"] == 0.0);
    CHECK(ds["fp16"]["hysteresis"] == 1);  // tune halves on the first overflow
    CHECK(ds["fp16"]["loss_scale_window"] == 1000);
    CHECK(ds["fp16"]["min_loss_scale"] == 1);
    CHECK_FALSE(ds.contains("scheduler"));  // no scheduler: DeepSpeed keeps the rate constant
    const auto adamw = nlohmann::json::parse(
        export_config(Framework::deepspeed, llama7b(Optimizer::adamw, Precision::bf16_mixed, 2, Checkpointing::none))
            .body);
    CHECK(adamw["optimizer"]["params"]["betas"] == nlohmann::json::array({0.9, 0.999}));
    CHECK(adamw["optimizer"]["params"]["eps"] == 1e-8);

    TrialConfig z0 = lion;
    z0.zero_stage = 0;
    const FrameworkExport hf = export_config(Framework::hf_trainer, z0);
    const auto args = nlohmann::json::parse(hf.body);
    CHECK(args["adam_beta1"] == 0.9);
    CHECK(args["adam_beta2"] == 0.99);
    CHECK(args["lr_scheduler_type"] == "constant");
    CHECK(args["warmup_steps"] == 0);
    CHECK_THAT(joined(hf.in_script), Catch::Contains("growth_interval=1000"));
}

TEST_CASE("pure bf16 is bf16 masters, gradients and states in DeepSpeed from ZeRO-1, said at ZeRO-0", "[exports]") {
    const auto z2 = nlohmann::json::parse(
        export_config(Framework::deepspeed, llama7b(Optimizer::adamw, Precision::bf16, 2, Checkpointing::none)).body);
    CHECK(z2["bf16"]["enabled"] == true);
    CHECK(z2["bf16"]["bf16_master_weights_and_grads"] == true);
    CHECK(z2["bf16"]["bf16_optimizer_states"] == true);
    const FrameworkExport z0 =
        export_config(Framework::deepspeed, llama7b(Optimizer::adamw, Precision::bf16, 0, Checkpointing::none));
    CHECK_FALSE(nlohmann::json::parse(z0.body)["bf16"].contains("bf16_master_weights_and_grads"));
    CHECK_THAT(joined(z0.cannot_express), Catch::Contains("pure bf16 at ZeRO-0"));
}

TEST_CASE("HF's Adafactor is built in the script as tune ran it, not with optim=adafactor's fixed rate", "[exports]") {
    const FrameworkExport e = export_config(
        Framework::hf_trainer, llama7b(Optimizer::adafactor, Precision::bf16_mixed, 0, Checkpointing::none));
    CHECK_FALSE(nlohmann::json::parse(e.body).contains("optim"));
    CHECK_THAT(joined(e.in_script), Catch::Contains("lr=None, scale_parameter=True, relative_step=True"));
}

TEST_CASE("LOMO is refused where HF Trainer cannot run it: under DeepSpeed and with fp16", "[exports]") {
    for (Framework f : {Framework::hf_trainer, Framework::torchrun}) {
        INFO(to_string(f));
        CHECK_THROWS_WITH(export_config(f, llama7b(Optimizer::lomo, Precision::bf16_mixed, 2, Checkpointing::none)),
                          Catch::Contains("LOMO under DeepSpeed (ZeRO-2)") && Catch::Contains("TypeError"));
        CHECK_THROWS_AS(export_config(f, llama7b(Optimizer::lomo, Precision::fp16_mixed, 0, Checkpointing::none)),
                        ExportRefused);
        CHECK_NOTHROW(export_config(f, llama7b(Optimizer::lomo, Precision::bf16_mixed, 0, Checkpointing::none)));
    }
    CHECK_THROWS_AS(export_config(Framework::accelerate_fsdp,
                                  llama7b(Optimizer::lomo, Precision::fp16_mixed, 0, Checkpointing::none)),
                    ExportRefused);
    // A ds_config runs DeepSpeed's engine at ZeRO-0 too.
    CHECK_THROWS_WITH(
        export_config(Framework::deepspeed, llama7b(Optimizer::lomo, Precision::bf16_mixed, 0, Checkpointing::none)),
        Catch::Contains("LOMO under DeepSpeed (ZeRO-0)"));
    // Through the CLI: --emit answers for the target's stack, which leaves the configuration out,
    // with the reason (exit 1); answering for our engine, --emit ranks out what the target refuses, with
    // the reason too.
    test::ScratchDir dir;
    const std::string db = dry_run_db(dir, "l", "optimizer = [\"lomo\"]\nprecision = [\"fp16-mixed\"]\n");
    const auto r = test::run_tune("best --emit hf-trainer --db " + db);
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.output, Catch::Contains("answering for hf-trainer: left out 1 it cannot run") &&
                             Catch::Contains("LOMO with fp16-mixed"));
    const auto ours = test::run_tune("best --framework tune --emit hf-trainer --db " + db);
    CHECK(ours.exit_code == 1);
    CHECK_THAT(ours.output,
               Catch::Contains("--emit hf-trainer cannot write exactly") && Catch::Contains("LOMO with fp16-mixed"));
}

// tune estimate and tune best take the same --framework names: accelerate-fsdp1 answers for accelerate-fsdp's stack.
TEST_CASE("best --framework takes an export target's name for its stack, as estimate does", "[exports][cli]") {
    test::ScratchDir dir;
    const std::string db = dry_run_db(dir, "f", "zero_stage = [1, 3]\n");
    const auto r = test::run_tune("best --framework accelerate-fsdp1 --db " + db);
    CHECK(r.exit_code == 0);
    CHECK_THAT(r.output, Catch::Contains("Answering for accelerate-fsdp") &&
                             Catch::Contains("Left out for accelerate-fsdp: 1 it cannot run"));
    CHECK(test::run_tune("best --framework accelerate-fsdp9 --db " + db).exit_code == 2);
}

TEST_CASE("selective checkpointing: off with flash attention, whole layers with eager, said either way", "[exports]") {
    TrialConfig c = llama7b(Optimizer::adamw, Precision::bf16_mixed, 0, Checkpointing::selective);
    const FrameworkExport flash = export_config(Framework::hf_trainer, c);
    CHECK_FALSE(nlohmann::json::parse(flash.body).contains("gradient_checkpointing"));
    CHECK_THAT(joined(flash.cannot_express), Catch::Contains("keeps what no checkpointing keeps"));
    c.attention = Attention::eager;
    const FrameworkExport eager = export_config(Framework::hf_trainer, c);
    CHECK(nlohmann::json::parse(eager.body)["gradient_checkpointing"] == true);
    CHECK_THAT(joined(eager.cannot_express), Catch::Contains("checkpoints whole layers"));
}

TEST_CASE("QLoRA under FSDP: 4-bit storage at every strategy, fp32 under fp16, checkpointing switched on once",
          "[exports][lora]") {
    for (std::uint32_t zero : {2u, 3u}) {
        TrialConfig q = llama7b(Optimizer::adamw, Precision::fp16_mixed, zero, Checkpointing::full);
        q.method = Method::qlora;
        INFO("ZeRO-" << zero);
        const FrameworkExport e = export_config(Framework::accelerate_fsdp1, q);
        CHECK_THAT(joined(e.in_script), Catch::Contains("bnb_4bit_quant_storage=torch.float32") &&
                                            !Catch::Contains("use_gradient_checkpointing"));
        const auto y = yaml_json(e.body);
        CHECK(y["fsdp_config"]["fsdp_use_orig_params"] == false);  // PEFT's FSDP guide
        CHECK(y["fsdp_config"]["fsdp_activation_checkpointing"] == true);
        // FULL_SHARD shards the 4-bit codes but never bitsandbytes' quantization state; our ZeRO-3 shards both.
        if (zero == 3)
            CHECK_THAT(joined(e.memory_added), Catch::Contains("quantization state") &&
                                                   Catch::Contains("+85.75 MiB per rank over tune's engine"));
        else
            CHECK_THAT(joined(e.memory_added), !Catch::Contains("quantization state"));
    }
    // Pure bf16 loads the model in bf16: the 4-bit storage follows.
    TrialConfig pure = llama7b(Optimizer::adamw, Precision::bf16, 3, Checkpointing::none);
    pure.method = Method::qlora;
    CHECK_THAT(joined(export_config(Framework::accelerate_fsdp, pure).in_script),
               Catch::Contains("bnb_4bit_quant_storage=torch.bfloat16"));
    // Unsharded (DeepSpeed ZeRO-2): prepare_model_for_kbit_training does the checkpointing set-up.
    TrialConfig q = llama7b(Optimizer::adamw, Precision::bf16_mixed, 2, Checkpointing::full);
    q.method = Method::qlora;
    CHECK_THAT(joined(export_config(Framework::deepspeed, q).in_script),
               Catch::Contains("prepare_model_for_kbit_training(model, use_gradient_checkpointing=True)") &&
                   !Catch::Contains("bnb_4bit_quant_storage"));
    // ZeRO-3 partitions the codes; the state stays whole (7/8 of it beyond tune's engine on 8 ranks).
    q.zero_stage = 3;
    CHECK_THAT(joined(export_config(Framework::deepspeed, q).memory_added),
               Catch::Contains("ZeRO-3 shards only the 4-bit codes") && Catch::Contains("--framework deepspeed"));
}

TEST_CASE("LoRA's DeepSpeed note counts the adapters it sizes, not the whole model", "[exports][lora]") {
    TrialConfig c = llama7b(Optimizer::adamw, Precision::bf16_mixed, 2, Checkpointing::none);
    c.method = Method::lora;
    c.lora_rank = 16;
    const FrameworkExport e = export_config(Framework::deepspeed, c);
    const std::string notes = joined(e.memory_added);
    CHECK_THAT(notes, Catch::Contains(std::to_string((trained_parameters(c.model, c) + 7) / 8) + " elements") &&
                          !Catch::Contains(std::to_string((c.model.param_count() + 7) / 8)));
}

namespace {
nlohmann::json toml_json(const std::string& text);
}  // namespace

TEST_CASE("a sweep name from the database stays one comment line in every emitted header, for every target",
          "[exports][cli]") {
    test::ScratchDir dir;
    const std::string db = dry_run_db(dir, "x\\ntouch P\\n#", "precision = [\"bf16-mixed\"]\nzero_stage = [3]\n");
    // Every target: the shell and YAML ones carry the header in the file, the JSON ones beside it on stderr
    // while the file stays JSON.
    for (std::string_view target : kFrameworkNames) {
        INFO(target);
        const std::string command =
            "TUNE_DB=" + db + " " + TUNE_BINARY + " export --trial 1 --emit " + std::string(target);
        const auto both = test::run_command(command + " 2>&1");
        REQUIRE(both.exit_code == 0);
        std::istringstream lines(both.output);
        for (std::string line; std::getline(lines, line);) CHECK_FALSE(line.starts_with("touch"));
        CHECK_THAT(both.output, Catch::Contains("x\\x0atouch P\\x0a#"));
        const auto file = test::run_command(command + " 2>/dev/null");
        if (target == "deepspeed" || target == "hf-trainer") CHECK_NOTHROW(nlohmann::json::parse(file.output));
        if (target == "torchtitan") CHECK_NOTHROW(toml_json(file.output));
        if (target.starts_with("accelerate") || target == "litgpt") CHECK_NOTHROW(yaml_json(file.output));
    }
}

TEST_CASE("every emitted file keeps to the frameworks' schemas, over every optimizer, precision, stage and method",
          "[exports][schema]") {
    // tests/fixtures/framework_schemas.json states each framework's keys, types, values and rules with their
    // sources; tests/exports/check_export_schema.py reads JSON, YAML (PyYAML, as accelerate does) and the
    // torchrun line and holds them to it.
    test::ScratchDir scratch;
    const std::string dir = scratch.file("emitted");
    std::filesystem::create_directories(dir);
    const std::map<Framework, std::string> targets{{Framework::deepspeed, "deepspeed--{}.json"},
                                                   {Framework::accelerate_fsdp, "accelerate--{}.yaml"},
                                                   {Framework::accelerate_fsdp1, "accelerate--v1-{}.yaml"},
                                                   {Framework::hf_trainer, "training_arguments--{}.json"},
                                                   {Framework::torchrun, "torchrun--{}.sh"},
                                                   {Framework::torchtitan, "torchtitan--{}.toml"},
                                                   {Framework::litgpt, "litgpt--{}.yaml"}};
    int written = 0, refused = 0;
    for (Optimizer o : kOptimizers)
        for (Precision p : kPrecisions)
            for (std::uint32_t zero : {0u, 1u, 2u, 3u})
                for (Checkpointing ckpt : kCheckpointings)
                    for (Method m : kMethods) {
                        TrialConfig c = llama7b(o, p, zero, ckpt);
                        c.method = m;
                        for (const auto& [f, pattern] : targets) {
                            FrameworkExport e;
                            try {
                                e = export_config(f, c);
                            } catch (const ExportRefused&) {
                                ++refused;
                                continue;
                            }
                            std::ofstream(dir + "/" + fmt::format(fmt::runtime(pattern), ++written)) << e.body;
                        }
                    }
    const auto r =
        test::run_command("python3 " + std::string(TUNE_SOURCE_DIR) + "/tests/exports/check_export_schema.py " +
                          TUNE_SOURCE_DIR + "/tests/fixtures/framework_schemas.json " + dir + " 2>&1");
    INFO(r.output.substr(0, 4000));
    CHECK(r.exit_code == 0);
    CHECK_THAT(r.output, Catch::Contains(fmt::format("{} files checked, 0 violations", written)));
    CHECK(refused > 0);  // LOMO under DeepSpeed and with fp16
}

TEST_CASE("the schema check catches what broke the exports: an unquoted no, Lion's eps, a missing flag",
          "[exports][schema]") {
    test::ScratchDir scratch;
    std::ofstream(scratch.file("accelerate--bad.yaml"))
        << "mixed_precision: no\ndistributed_type: FSDP\nfsdp_config:\n  fsdp_version: 2\n"
           "  fsdp_sharding_strategy: FULL_SHARD\n";
    std::ofstream(scratch.file("deepspeed--bad.json"))
        << R"({"optimizer": {"type": "Lion", "params": {"eps": 1e-8}}, "zero_optimization": {"stage": 2}})";
    std::ofstream(scratch.file("deepspeed--client.json")) << R"({"zero_optimization": {"stage": 1}})";
    std::ofstream(scratch.file("torchrun--bad.sh")) << "torchrun --nproc_per_node 8 train.py --optim lomo --fp16\n";
    const auto r =
        test::run_command("python3 " + std::string(TUNE_SOURCE_DIR) + "/tests/exports/check_export_schema.py " +
                          TUNE_SOURCE_DIR + "/tests/fixtures/framework_schemas.json " +
                          scratch.file("accelerate--bad.yaml") + " " + scratch.file("deepspeed--bad.json") + " " +
                          scratch.file("deepspeed--client.json") + " " + scratch.file("torchrun--bad.sh") + " 2>&1");
    INFO(r.output);
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.output, Catch::Contains("mixed_precision is False, a boolean, not string") &&
                             Catch::Contains("fsdp_sharding_strategy: not allowed") &&
                             Catch::Contains("optimizer.params.eps: not allowed") &&
                             Catch::Contains("zero_allow_untested_optimizer: required") &&
                             Catch::Contains("fp16: not allowed") && Catch::Contains("4 files checked, 6 violations"));
}

namespace {

// The TOML as torchtitan's ConfigManager reads it (tomllib), as JSON.
nlohmann::json toml_json(const std::string& text) {
    test::ScratchDir dir;
    std::ofstream(dir.file("c.toml")) << text;
    const auto r = test::run_command(
        "python3 -c 'import json, sys, tomllib; print(json.dumps(tomllib.loads(sys.stdin.read())))' < " +
        dir.file("c.toml") + " 2>&1");
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    return nlohmann::json::parse(r.output);
}

}  // namespace

TEST_CASE("the torchtitan export writes its job TOML: the flavor, FSDP2's degrees and resharding, checkpointing",
          "[exports]") {
    TrialConfig c = llama7b(Optimizer::adamw, Precision::bf16_mixed, 3, Checkpointing::full);
    c.model = *find_model("llama3-8b");
    const FrameworkExport e = export_config(Framework::torchtitan, c);
    const auto t = toml_json(render(e, Framework::torchtitan).out);
    CHECK(t["model"]["name"] == "llama3");
    CHECK(t["model"]["flavor"] == "8B");
    CHECK(t["optimizer"]["name"] == "AdamW");
    CHECK(t["optimizer"]["lr"] == c.lr);
    // No warmup, and the decay after it ends at the rate itself: constant, as tune ran it.
    CHECK(t["lr_scheduler"]["warmup_steps"] == 0);
    CHECK(t["lr_scheduler"]["min_lr_factor"] == 1.0);
    CHECK(t["training"]["local_batch_size"] == 2);
    CHECK(t["training"]["global_batch_size"] == 2 * 16 * 8);
    CHECK(t["training"]["seq_len"] == 2048);
    CHECK(t["training"]["mixed_precision_param"] == "bfloat16");
    CHECK(t["parallelism"]["data_parallel_shard_degree"] == 8);
    CHECK(t["parallelism"]["data_parallel_replicate_degree"] == 1);
    CHECK(t["parallelism"]["fsdp_reshard_after_forward"] == "always");
    CHECK(t["activation_checkpoint"]["mode"] == "full");
    CHECK(e.cannot_express.empty());
    // ZeRO-2 keeps the gathered parameters to backward; ZeRO-0 replicates (DDP).
    c.zero_stage = 2;
    CHECK(toml_json(export_config(Framework::torchtitan, c).body)["parallelism"]["fsdp_reshard_after_forward"] ==
          "never");
    c.zero_stage = 0;
    const auto ddp = toml_json(export_config(Framework::torchtitan, c).body);
    CHECK(ddp["parallelism"]["data_parallel_replicate_degree"] == 8);
    CHECK(ddp["parallelism"]["data_parallel_shard_degree"] == 1);
    // Selective-op is torchtitan's own op policy; the stacks that checkpoint whole layers refuse it.
    c.checkpointing = Checkpointing::selective_op;
    const FrameworkExport op = export_config(Framework::torchtitan, c);
    CHECK(toml_json(op.body)["activation_checkpoint"]["mode"] == "selective");
    CHECK(toml_json(op.body)["activation_checkpoint"]["selective_ac_option"] == "op");
    CHECK(op.cannot_express.empty());
    CHECK_THROWS_WITH(export_config(Framework::deepspeed, c), Catch::Contains("whole decoder layers"));
    // A shape that is no flavor: said, with the arguments to register one.
    const FrameworkExport custom =
        export_config(Framework::torchtitan, llama7b(Optimizer::adamw, Precision::fp32, 3, Checkpointing::none));
    CHECK_THAT(joined(custom.cannot_express), Catch::Contains("register one") && Catch::Contains("n_kv_heads=32"));
    CHECK(toml_json(custom.body)["training"]["mixed_precision_param"] == "float32");
    // What torchtitan cannot run is refused with the profile's reason.
    CHECK_THROWS_WITH(
        export_config(Framework::torchtitan, llama7b(Optimizer::lion, Precision::bf16_mixed, 3, Checkpointing::none)),
        Catch::Contains("AdamW only"));
    CHECK_THROWS_WITH(
        export_config(Framework::torchtitan, llama7b(Optimizer::adamw, Precision::bf16, 3, Checkpointing::none)),
        Catch::Contains("pure bf16 under torchtitan"));
}

TEST_CASE("the litgpt export writes its fine-tuning YAML: precision, quantization, LoRA switches, optimizer",
          "[exports][lora]") {
    TrialConfig q = llama7b(Optimizer::adamw, Precision::bf16, 0, Checkpointing::none);
    q.world_size = 1;
    q.method = Method::qlora;
    q.lora_rank = 32;
    q.lora_alpha = 16.0;
    q.lora_targets = LoraTargets::qv;
    const FrameworkExport e = export_config(Framework::litgpt, q);
    const auto y = yaml_json(render(e, Framework::litgpt).out);
    CHECK(y["precision"] == "bf16-true");
    CHECK(y["quantize"] == "bnb.nf4-dq");
    CHECK(y["devices"] == 1);
    CHECK(y["lora_r"] == 32);
    CHECK(y["lora_alpha"] == 16);
    CHECK(y["lora_query"] == true);
    CHECK(y["lora_key"] == false);
    CHECK(y["lora_value"] == true);
    CHECK(y["lora_mlp"] == false);
    CHECK(y["train"]["micro_batch_size"] == 2);
    CHECK(y["train"]["global_batch_size"] == 2 * 16);
    CHECK(y["train"]["max_seq_length"] == 2048);
    // Its scripts divide by the warmup (0 raises ZeroDivisionError) and refuse max_norm: neither
    // a warmup of 0 nor a clip is written, and the schedule and the clip it cannot hold are said;
    // the schedule is every configuration's, the clip this one's.
    CHECK(y["train"]["lr_warmup_steps"] == 1);
    CHECK_FALSE(y["train"].contains("max_norm"));
    CHECK_THAT(joined(e.cannot_express_any), Catch::Contains("cosine to 0"));
    CHECK_THAT(joined(e.cannot_express), Catch::Contains("do not clip") && !Catch::Contains("cosine to 0"));
    CHECK_THAT(render(e, Framework::litgpt).out, Catch::Contains("# cannot express: a constant learning rate") &&
                                                     Catch::Contains("# cannot express: gradient clipping at 1"));
    CHECK(y["optimizer"]["class_path"] == "torch.optim.AdamW");
    CHECK(y["optimizer"]["init_args"]["betas"] == nlohmann::json::array({0.9, 0.999}));
    // 1e-08 without a '.' would read as a string in PyYAML; the writer adds one.
    CHECK(y["optimizer"]["init_args"]["eps"].is_number_float());
    CHECK(y["optimizer"]["init_args"]["eps"] == 1e-8);
    CHECK_THAT(joined(e.memory_added), Catch::Contains("PagedAdamW"));
    CHECK_THAT(render(e, Framework::litgpt).out, Catch::Contains("# litgpt finetune_lora CHECKPOINT_DIR"));
    // LoRA on 8 devices at ZeRO-2: LitGPT shards fully and checkpoints every Block there.
    TrialConfig lora = llama7b(Optimizer::adamw, Precision::bf16_mixed, 2, Checkpointing::none);
    lora.method = Method::lora;
    lora.lora_targets = LoraTargets::all_linear;
    const FrameworkExport sharded = export_config(Framework::litgpt, lora);
    CHECK_THAT(joined(sharded.cannot_express),
               Catch::Contains("ZeRO-2 on 8 devices") && Catch::Contains("every Block"));
    CHECK(yaml_json(sharded.body)["lora_mlp"] == true);
    // QLoRA on several devices, or with a mixed-precision plugin: refused, as LitGPT refuses it.
    q.world_size = 8;
    CHECK_THROWS_WITH(export_config(Framework::litgpt, q), Catch::Contains("one device only"));
    q.world_size = 1;
    q.precision = Precision::bf16_mixed;
    CHECK_THROWS_WITH(export_config(Framework::litgpt, q), Catch::Contains("mixed precision"));
}

TEST_CASE("an export whose stack keeps fp32 weights says to load the model in fp32, and what a LoRA base costs",
          "[exports]") {
    TrialConfig c = llama7b(Optimizer::adamw, Precision::bf16_mixed, 0, Checkpointing::full);
    c.method = Method::lora;
    // Every line a rendered export writes: the file, or a JSON file's notes beside it.
    const auto text = [&](Framework f) {
        const RenderedExport r = render(export_config(f, c), f);
        return r.out + r.notes;
    };
    const std::string hf = text(Framework::hf_trainer);
    CHECK_THAT(hf, Catch::Contains("# in your script: load the model in fp32") &&
                       Catch::Contains("# memory added: the frozen base in fp32") &&
                       Catch::Contains("--base-dtype 16-bit"));
    // DeepSpeed casts the module to 16 bits whatever it loaded in; pure bf16 loads in bf16.
    c.zero_stage = 3;
    for (Framework f : {Framework::deepspeed, Framework::hf_trainer})
        CHECK_THAT(text(f), !Catch::Contains("load the model in fp32"));
    c.zero_stage = 0;
    c.precision = Precision::bf16;
    CHECK_THAT(text(Framework::hf_trainer), !Catch::Contains("load the model in fp32"));
}

TEST_CASE("every export of settings without a model's shape writes its config and sizes no memory note", "[exports]") {
    // What a stored trial's settings can reach an export as: no vocabulary, layers or heads to size.
    for (std::size_t f = 0; f < kFrameworkNames.size(); ++f)
        for (Precision p : kPrecisions)
            for (Method m : kMethods)
                for (Offload o : kOffloads)
                    for (std::uint32_t zero : {0u, 1u, 2u, 3u}) {
                        TrialConfig c;
                        c.precision = p, c.method = m, c.offload = o, c.zero_stage = zero, c.world_size = 2;
                        INFO(kFrameworkNames[f] << " " << to_string(p) << " " << to_string(m) << " zero " << zero
                                                << " offload " << to_string(o));
                        try {
                            const FrameworkExport e = export_config(static_cast<Framework>(f), c);
                            CHECK_FALSE(e.body.empty());
                        } catch (const ExportRefused&) {
                            // a combination the framework cannot run: refused with its reason
                        }
                    }
}
