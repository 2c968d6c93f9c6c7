// LoRA (method lora): the trainer's adapters against PyTorch, the frozen
// base, every optimizer on adapters, the dimension rows and their collapse,
// the validity rules, and PEFT adapter folders.
// scripts/make_torch_lora_fixtures.py writes the reference: the tiny GQA
// Llama of the full-training fixture, frozen, with rank-4 alpha-8 adapters on
// every linear, loaded here the way `tune trial --init --init-adapter` loads them.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <fstream>
#include <set>

#include "core/validity.h"
#include "kernels/math/nf4.h"
#include "support/run_command.h"
#include "support/trainer_fixture.h"
#include "sweep/space.h"
#include "sweep/spec.h"
#include "train/io/hf_model.h"
#include "train/io/peft_adapter.h"
#include "train/io/safetensors.h"
#include "train/lora.h"

using namespace tune;

namespace {

const std::filesystem::path kBase = std::filesystem::path(TUNE_SOURCE_DIR) / "tests/fixtures/torch/llama_tiny";
const std::filesystem::path kLora = std::filesystem::path(TUNE_SOURCE_DIR) / "tests/fixtures/torch/llama_tiny_lora";

TrialConfig fixture_config() {
    TrialConfig c = test::trainer_config(train::load_hf_config(kBase));
    c.micro_batch = 2;
    c.context = 16;
    c.lr = 1e-3;
    c.weight_decay = 0.1;
    c.clip = 1.0;
    train::apply_peft_config(train::load_peft_config(kLora), c);
    return c;
}

struct Rig {
    TrialConfig config = fixture_config();
    train::ParamLayout layout = train::make_param_layout(config.model, 1, config.adam8bit_block);
    train::ParamLayout adapter_layout =
        train::make_adapter_layout(config.model, config.lora_rank, config.lora_targets, 1, config.adam8bit_block);
    train::HostParams init = train::load_hf_weights(kBase, layout);
    train::HostParams adapters = train::load_peft_adapter(kLora, adapter_layout);
    train::SafetensorsFile ref = train::SafetensorsFile::load(kLora / "reference.safetensors");
    test::TrainerRig rig{config, train::file_tokens(kBase / "tokens.bin", config.model.vocab), &init, &adapters};
};

std::vector<float> tensor_of(const train::HostParams& p, const train::ParamLayout& l, std::size_t b, std::size_t k) {
    const train::TensorView& v = l.flat(b).tensors[k];
    return {p[b].begin() + v.offset, p[b].begin() + v.offset + v.numel()};
}

double max_diff(const train::HostParams& a, const train::HostParams& b) {
    double most = 0;
    for (std::size_t i = 0; i < a.size(); ++i) most = std::max(most, test::max_abs_diff(a[i], b[i]));
    return most;
}

}  // namespace

TEST_CASE("LoRA: the loss and every adapter gradient match PyTorch (fp32)", "[lora][torch]") {
    Rig r;
    REQUIRE(r.config.method == Method::lora);
    REQUIRE(r.config.lora_rank == 4);
    REQUIRE(r.config.lora_scale() == 2.0);
    const double loss = r.rig.trainer->compute_gradients();
    const double want_loss = r.ref.read_f32("loss")[0];
    INFO("loss " << loss << " vs " << want_loss);
    CHECK(loss == Approx(want_loss).epsilon(1e-5));
    const train::HostParams grads = r.rig.trainer->model().download_grads();
    std::size_t checked = 0;
    double worst = 0;
    for (std::size_t b = 0; b < r.adapter_layout.buffers(); ++b) {
        for (std::size_t k = 0; k < r.adapter_layout.flat(b).tensors.size(); ++k) {
            const std::string name = train::tensor_name(r.adapter_layout, b, k);
            const std::vector<float> want = r.ref.read_f32("grad." + name);
            const std::vector<float> got = tensor_of(grads, r.adapter_layout, b, k);
            const double diff = test::max_abs_diff(got, want);
            worst = std::max(worst, diff / std::max(1.0, test::max_abs(want)));
            INFO(name << ": max |diff| " << diff << ", max |grad| " << test::max_abs(want));
            CHECK(test::max_abs(want) > 0);  // B is not zero in the fixture, so dA is not either
            CHECK(diff <= 1e-5 * std::max(1.0, test::max_abs(want)));
            ++checked;
        }
    }
    CHECK(checked == 2 * 7 * 2);  // A and B, 7 linears, 2 layers
    WARN("LoRA fixture: |loss - torch| = " << std::abs(loss - want_loss) << ", worst adapter gradient error " << worst);
}

TEST_CASE("LoRA: adapters after 3 AdamW steps with clipping match PyTorch, the base does not move", "[lora][torch]") {
    Rig r;
    const std::vector<float> losses = r.ref.read_f32("losses");
    const train::HostParams base_before = r.rig.trainer->base().download_weights();
    for (int s = 0; s < 3; ++s) {
        const train::StepStats stats = r.rig.trainer->step();
        CHECK(stats.loss == Approx(losses[static_cast<std::size_t>(s)]).epsilon(1e-5));
    }
    const train::HostParams weights = r.rig.trainer->model().download_weights();
    for (std::size_t b = 0; b < r.adapter_layout.buffers(); ++b) {
        for (std::size_t k = 0; k < r.adapter_layout.flat(b).tensors.size(); ++k) {
            const std::string name = train::tensor_name(r.adapter_layout, b, k);
            INFO(name);
            CHECK(test::max_abs_diff(tensor_of(weights, r.adapter_layout, b, k), r.ref.read_f32("step3." + name)) <=
                  3e-5);
        }
    }
    CHECK(max_diff(r.rig.trainer->base().download_weights(), base_before) == 0.0);
}

TEST_CASE("LoRA: B starts at zero, so the first loss is the base model's", "[lora]") {
    TrialConfig full = test::trainer_config(test::micro_model());
    TrialConfig lora = full;
    lora.method = Method::lora;
    lora.lora_rank = 4;
    test::TrainerRig a(full, std::make_unique<test::FixedTokens>(full.model.vocab));
    test::TrainerRig b(lora, std::make_unique<test::FixedTokens>(lora.model.vocab));
    CHECK(b.trainer->compute_gradients() == Approx(a.trainer->compute_gradients()).epsilon(1e-6));
    // Only A's gradients are zero (dA = s (dy B)^T x with B = 0); B's are not.
    const train::HostParams grads = b.trainer->model().download_grads();
    const train::ParamLayout& l = b.trainer->model().layout();
    CHECK(test::max_abs(tensor_of(grads, l, 0, 0)) == 0.0);
    CHECK(test::max_abs(tensor_of(grads, l, 0, 1)) > 0.0);
}

TEST_CASE("LoRA: every optimizer, precision and ZeRO stage trains the adapters of a frozen base", "[lora]") {
    for (Optimizer opt : kOptimizers) {
        for (Precision prec : {Precision::fp32, Precision::bf16_mixed, Precision::bf16}) {
            for (std::uint32_t zero : {0u, 3u}) {
                for (LoraTargets targets : kLoraTargets) {
                    TrialConfig c = test::trainer_config(test::micro_model(), opt, prec);
                    c.method = Method::lora;
                    c.lora_rank = 4;
                    c.lora_targets = targets;
                    c.zero_stage = zero;
                    c.steps = 2;
                    INFO(summary(c));
                    test::TrainerRig rig(c, std::make_unique<test::FixedTokens>(c.model.vocab));
                    const train::HostParams base = rig.trainer->base().download_weights();
                    const train::HostParams adapters = rig.trainer->model().download_weights();
                    double first = 0, last = 0;
                    for (int s = 0; s < 3; ++s) {
                        const double loss = rig.trainer->step().loss;
                        if (s == 0) first = loss;
                        last = loss;
                    }
                    CHECK(std::isfinite(last));
                    // Adafactor's relative step starts tiny from B = 0 (its scale is the weights' RMS).
                    if (opt != Optimizer::adafactor) CHECK(last < first);
                    CHECK(max_diff(rig.trainer->model().download_weights(), adapters) > 0);
                    CHECK(max_diff(rig.trainer->base().download_weights(), base) == 0.0);
                    // Gradients, master weights and states exist for the adapters only.
                    const auto& mem = rig.trainer->memory();
                    const auto adapter_bytes =
                        static_cast<std::uint64_t>(rig.trainer->model().layout().padded_total()) * 4;
                    CHECK(mem.peak_breakdown()[Component::grads] <= adapter_bytes);
                    CHECK(mem.peak_breakdown()[Component::master] <= adapter_bytes);
                }
            }
        }
    }
}

TEST_CASE("method, lora_rank and lora_targets: a rank with method full is collapsed, not enumerated",
          "[lora][dimensions]") {
    const std::string text =
        "name = \"t\"\n[model]\npreset = \"tiny\"\n[hardware]\ndevice = \"cpu\"\n[space]\n"
        "method = [\"full\", \"lora\", \"qlora\"]\nlora_rank = [4, 8]\nlora_targets = [\"attention\", \"all-linear\"]\n"
        "precision = [\"bf16-mixed\"]\n[trial]\nlora_alpha = 32\n";
    const SweepSpec spec = parse_sweep(text, "t.toml");
    const auto candidates = expand_space(spec);
    REQUIRE(candidates.size() == 1 + 2 * 2 * 2);
    std::set<std::string> hashes;
    for (const Candidate& c : candidates) {
        hashes.insert(config_hash(c.config));
        CHECK(c.config.lora_alpha == 32.0);
        if (c.config.method == Method::full) {
            CHECK(c.config.lora_rank == TrialConfig{}.lora_rank);
            CHECK_THAT(summary(c.config), !Catch::Contains(" r"));
        }
    }
    CHECK(hashes.size() == candidates.size());
    // A configuration from before the rows existed keeps its JSON, hence its hash.
    const TrialConfig old;
    const nlohmann::json j = old;
    CHECK_FALSE(j.contains("method"));
    CHECK_FALSE(j.contains("lora_rank"));
    CHECK_FALSE(j.contains("lora_alpha"));
}

TEST_CASE("LoRA validity: a rank past a targeted matrix, qlora with fp32, are bad input", "[lora][validity]") {
    TrialConfig c = test::trainer_config(test::micro_model());  // hidden 16, kv 8, ffn 24
    c.method = Method::lora;
    c.lora_rank = 8;
    CHECK_FALSE(invalid_reason(c));
    c.lora_rank = 9;
    auto bad = invalid_reason(c);
    REQUIRE(bad);
    CHECK(bad->kind == "lora-rank");
    CHECK(refuses_input(*bad));
    CHECK_THAT(bad->reason, Catch::Contains("between 1 and 8"));
    c.lora_rank = 4;
    c.method = Method::qlora;
    bad = invalid_reason(c);
    REQUIRE(bad);
    CHECK(bad->kind == "qlora-precision");
    CHECK(refuses_input(*bad));
    c.method = Method::full;
    c.lora_rank = 1000;  // meaningless without adapters, so not checked
    CHECK_FALSE(invalid_reason(c));
}

TEST_CASE("PEFT adapter folders: saved ones load back, unknown targets and missing tensors are named", "[lora][peft]") {
    Rig r;
    const auto dir = std::filesystem::path(TUNE_BUILD_DIR) / "test_lora_peft";
    std::filesystem::remove_all(dir);
    train::save_peft_adapter(dir, r.config, r.adapter_layout, r.adapters);
    const train::PeftAdapterConfig peft = train::load_peft_config(dir);
    CHECK(peft.rank == 4);
    CHECK(peft.alpha == 8.0);
    CHECK(peft.targets == LoraTargets::all_linear);
    CHECK(max_diff(train::load_peft_adapter(dir, r.adapter_layout), r.adapters) == 0.0);
    std::ofstream(dir / "adapter_config.json")
        << R"({"r": 4, "lora_alpha": 8, "target_modules": ["q_proj", "lm_head"]})";
    CHECK_THROWS_WITH(train::load_peft_config(dir), Catch::Contains("no adapter for \"lm_head\""));
    // lora_alpha as a string is refused by name, never replaced by PEFT's default of 8.
    for (const char* alpha : {"\"100\"", "-2", "true", "0"}) {
        INFO(alpha);
        std::ofstream(dir / "adapter_config.json")
            << R"({"r": 4, "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj"], "lora_alpha": )" << alpha << "}";
        CHECK_THROWS_WITH(train::load_peft_config(dir), Catch::Contains("lora_alpha"));
    }
    std::ofstream(dir / "adapter_config.json")
        << R"({"r": 4, "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj"]})";
    CHECK(train::load_peft_config(dir).alpha == 8.0);  // absent: PEFT's default
    const train::ParamLayout attention =
        train::make_adapter_layout(r.config.model, 4, LoraTargets::attention, 1, r.config.adam8bit_block);
    CHECK_THROWS_WITH(train::load_peft_adapter(dir, attention),
                      Catch::Contains("unexpected base_model.model.model.layers.0.mlp.down_proj.lora_A.weight"));
    // q and v only (PEFT's default for Llama) is its own target set, saved and read back as such.
    TrialConfig qv = r.config;
    qv.lora_targets = LoraTargets::qv;
    const train::ParamLayout qv_layout =
        train::make_adapter_layout(qv.model, qv.lora_rank, qv.lora_targets, 1, qv.adam8bit_block);
    CHECK(qv_layout.layer.tensors.size() == 4);  // A and B of q_proj and v_proj
    train::save_peft_adapter(dir, qv, qv_layout, train::lora_init(qv_layout, 3));
    CHECK(train::load_peft_config(dir).targets == LoraTargets::qv);
    CHECK(train::load_peft_adapter(dir, qv_layout).size() == qv_layout.buffers());
}

namespace {

// The base as QLoRA holds it: each layer buffer through NF4 and back (the
// CPU backend's quantize and dequantize), norm weights left exact.
train::HostParams nf4_round_trip(const train::HostParams& host, const train::ParamLayout& layout) {
    kernels::CpuBackend cpu(kernels::CpuBackendOptions{1, 0});
    train::HostParams out = host;
    const std::int64_t n = layout.layer.padded;
    std::vector<std::uint8_t> q(static_cast<std::size_t>(math::nf4_sizes(n).bytes));
    std::vector<float> absmax(static_cast<std::size_t>(n / 64));
    for (std::int64_t i = 0; i < layout.layers; ++i) {
        std::vector<float>& buf = out[static_cast<std::size_t>(i)];
        cpu.nf4_quantize(q.data(), buf.data(), n, absmax.data());
        std::vector<float> back(buf.size());
        cpu.nf4_dequantize(back.data(), kernels::DType::f32, q.data(), n, 0, n);
        for (const train::TensorView& t : layout.layer.tensors)
            if (t.matrix())
                std::copy(back.begin() + t.offset, back.begin() + t.offset + t.numel(), buf.begin() + t.offset);
    }
    return out;
}

}  // namespace

TEST_CASE("QLoRA computes what LoRA computes on the NF4-rounded base, bit for bit", "[lora][qlora]") {
    for (Precision p : {Precision::bf16_mixed, Precision::bf16}) {
        TrialConfig c = test::trainer_config(test::micro_model(), Optimizer::adamw, p);
        c.method = Method::qlora;
        c.lora_rank = 4;
        INFO(summary(c));
        const train::ParamLayout layout = train::make_param_layout(c.model, 1, c.adam8bit_block);
        const train::HostParams base = train::random_init(layout, 7, 0.1);
        const train::HostParams rounded = nf4_round_trip(base, layout);
        test::TrainerRig q(c, std::make_unique<test::FixedTokens>(c.model.vocab), &base);
        c.method = Method::lora;
        test::TrainerRig l(c, std::make_unique<test::FixedTokens>(c.model.vocab), &rounded);
        for (int s = 0; s < 3; ++s) CHECK(q.trainer->step().loss == l.trainer->step().loss);
        CHECK(max_diff(q.trainer->model().download_weights(), l.trainer->model().download_weights()) == 0.0);
        // And the NF4 base is not the original one: the rounding is real.
        double moved = 0;
        for (std::size_t i = 0; i < base.size(); ++i) moved = std::max(moved, test::max_abs_diff(base[i], rounded[i]));
        CHECK(moved > 0);
    }
}

TEST_CASE("QLoRA at ZeRO stage 3 gathers its NF4 shards and computes what stage 0 computes, bit for bit",
          "[lora][qlora][zero]") {
    for (Optimizer opt : {Optimizer::adamw, Optimizer::lomo}) {
        TrialConfig c = test::trainer_config(test::micro_model(), opt, Precision::bf16_mixed);
        c.method = Method::qlora;
        c.lora_rank = 4;
        c.lora_targets = LoraTargets::all_linear;
        INFO(summary(c));
        test::TrainerRig whole(c, std::make_unique<test::FixedTokens>(c.model.vocab));
        c.zero_stage = 3;
        test::TrainerRig sharded(c, std::make_unique<test::FixedTokens>(c.model.vocab));
        for (int s = 0; s < 3; ++s) CHECK(sharded.trainer->step().loss == whole.trainer->step().loss);
        CHECK(max_diff(sharded.trainer->model().download_weights(), whole.trainer->model().download_weights()) == 0.0);
        // The shard is whole absmax groups (16384 weights), so one rank keeps more than the layer's padded buffer.
        CHECK(sharded.trainer->memory().peak_breakdown()[Component::params] >
              whole.trainer->memory().peak_breakdown()[Component::params]);
    }
}

TEST_CASE("tune trial and tune estimate take the method flags, bad adapter input is exit 2", "[lora][cli]") {
    const auto est = test::run_tune(
        "estimate --model llama-7b --device rtx4090 --method qlora --lora-rank 64 "
        "--lora-targets all-linear --lora-alpha 16 --checkpointing full --context 512");
    CHECK(est.exit_code == 0);
    CHECK_THAT(est.output, Catch::Contains("qlora"));
    const auto rank = test::run_tune("trial --model tiny --method lora --lora-rank 4096 --steps 2");
    CHECK(rank.exit_code == 2);
    CHECK_THAT(rank.output, Catch::Contains("lora_rank 4096"));
    const auto fp32 = test::run_tune("trial --model tiny --method qlora --precision fp32 --steps 2");
    CHECK(fp32.exit_code == 2);
    CHECK_THAT(fp32.output, Catch::Contains("qlora"));
    const auto target = test::run_tune("trial --model tiny --method lora --lora-targets mlp --steps 2");
    CHECK(target.exit_code == 2);
    CHECK_THAT(target.output, Catch::Contains("--lora-targets"));
}

TEST_CASE("tune trial starts from a PEFT adapter and saves one PEFT can read", "[lora][cli][peft]") {
    const auto dir = std::filesystem::path(TUNE_BUILD_DIR) / "test_lora_cli_adapter";
    std::filesystem::remove_all(dir);
    const auto r = test::run_tune("trial --init " + kBase.string() + " --init-adapter " + kLora.string() +
                                  " --tokens " + (kBase / "tokens.bin").string() +
                                  " --micro-batch 2 --context 16 --steps 2 --warmup 1 --backend cpu --save-adapter " +
                                  dir.string() + " --json");
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    CHECK_THAT(r.output, Catch::Contains("\"method\":\"lora\"") && Catch::Contains("\"lora_rank\":4"));
    const train::PeftAdapterConfig peft = train::load_peft_config(dir);
    CHECK(peft.rank == 4);
    CHECK(peft.alpha == 8.0);
    const TrialConfig c = fixture_config();
    const train::ParamLayout layout =
        train::make_adapter_layout(c.model, c.lora_rank, c.lora_targets, 1, c.adam8bit_block);
    const train::HostParams saved = train::load_peft_adapter(dir, layout);
    CHECK(max_diff(saved, train::load_peft_adapter(kLora, layout)) > 0);  // trained
}

TEST_CASE("tune trial --save-adapter writes through a rename and refuses what it cannot replace, before training",
          "[lora][cli][peft][hostile]") {
    const auto dir = std::filesystem::path(TUNE_BUILD_DIR) / "test_lora_save_hostile";
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir / "out");
    const std::string trial =
        "trial --model tiny --method lora --lora-rank 4 --micro-batch 1 --context 16 --steps 2 "
        "--warmup 1 --backend cpu --save-adapter ";
    // A symlink planted at adapter_config.json is replaced, its target left alone.
    std::ofstream(dir / "victim") << "precious\n";
    std::filesystem::create_symlink(dir / "victim", dir / "out" / "adapter_config.json");
    const auto linked = test::run_tune(trial + (dir / "out").string());
    INFO(linked.output);
    REQUIRE(linked.exit_code == 0);
    CHECK_FALSE(std::filesystem::is_symlink(dir / "out" / "adapter_config.json"));
    std::ifstream victim(dir / "victim");
    std::string line;
    std::getline(victim, line);
    CHECK(line == "precious");
    CHECK(train::load_peft_config(dir / "out").rank == 4);

    // A FIFO in a file's place, or a file in the folder's place: exit 2 at once, naming the path.
    std::filesystem::create_directories(dir / "fifo");
    REQUIRE(::mkfifo((dir / "fifo" / "adapter_model.safetensors").c_str(), 0600) == 0);
    const auto fifo = test::run_tune(trial + (dir / "fifo").string());
    CHECK(fifo.exit_code == 2);
    CHECK_THAT(fifo.output, Catch::Contains("adapter_model.safetensors") && Catch::Contains("not a regular file"));
    CHECK_THAT(fifo.output, !Catch::Contains("step 1"));  // refused before training
    const auto null = test::run_tune(trial + "/dev/null");
    CHECK(null.exit_code == 2);
    CHECK_THAT(null.output, Catch::Contains("/dev/null: it is not a directory"));

    // A write that fails (a file-size limit stands for a full disk): exit 2 naming the file, nothing truncated left.
    const auto full = test::run_command("bash -c 'ulimit -f 8; trap \"\" XFSZ; exec " + std::string(TUNE_BINARY) + " " +
                                        trial + (dir / "small").string() + "' 2>&1");
    INFO(full.output);
    CHECK(full.exit_code == 2);
    CHECK_THAT(full.output, Catch::Contains("adapter_model.safetensors") && Catch::Contains("failed"));
    CHECK_FALSE(std::filesystem::exists(dir / "small" / "adapter_model.safetensors"));
    std::size_t left = 0;
    for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir / "small"))
        if (e.path().filename() != "adapter_config.json") ++left;
    CHECK(left == 0);  // no temporary file stays behind
}
