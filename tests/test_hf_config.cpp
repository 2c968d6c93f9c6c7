// Hugging Face config.json read faithfully: the parameter totals of eight
// published models, head_dim, tied embeddings, biases, sliding windows and
// rope_scaling carried into the ModelSpec, counted by the estimator, and
// refused by the trainer by name.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <tuple>

#include "core/hf_config.h"
#include "core/presets.h"
#include "estimate/estimate.h"
#include "estimate/flat_layout.h"
#include "sweep/spec.h"
#include "tests/test_store_support.h"
#include "train/io/hf_model.h"

using namespace tune;

namespace {

ModelSpec fixture(const std::string& name) {
    return load_hf_config(std::filesystem::path(TUNE_SOURCE_DIR) / "tests/fixtures/hf" / name / "config.json");
}

}  // namespace

TEST_CASE("parameter counts match the published totals", "[hf]") {
    // tests/fixtures/hf/README.md names the repositories these totals come from.
    const std::vector<std::pair<std::string, std::uint64_t>> published{
        {"llama-2-7b", 6'738'415'616},   {"llama-2-13b", 13'015'864'320},      {"llama-2-70b", 68'976'648'192},
        {"llama-3-8b", 8'030'261'248},   {"llama-3-70b", 70'553'706'496},      {"mistral-7b", 7'241'732'096},
        {"qwen2-7b", 7'615'616'512},     {"mistral-nemo-12b", 12'247'782'400}, {"qwen2-0.5b", 494'032'768},
        {"llama-3.1-8b", 8'030'261'248}, {"llama-3.2-1b", 1'235'814'400},      {"llama-3.3-70b", 70'553'706'496},
        {"qwen2.5-7b", 7'615'616'512},   {"tinyllama-1.1b", 1'100'048'384}};
    for (const auto& [name, total] : published) {
        INFO(name);
        CHECK(fixture(name).param_count() == total);
    }
}

TEST_CASE("LitGPT's Llama 3.2 keeps its head apart from the embedding: the tied total plus vocab x hidden", "[hf]") {
    // litgpt/model.py builds lm_head beside wte, and scripts/convert_hf_checkpoint.py
    // copies the tied embedding into it: tests/fixtures/hf/README.md.
    for (const auto& [name, tied] :
         {std::pair{"litgpt-llama-3.2-1b", 1'235'814'400ull}, std::pair{"litgpt-llama-3.2-3b", 3'212'749'824ull}}) {
        INFO(name);
        const ModelSpec m = fixture(name);
        CHECK_FALSE(m.tied_embeddings);
        CHECK(m.param_count() == tied + 128'256ull * m.hidden);
    }
}

TEST_CASE("Qwen3's counts round to its model cards' figures", "[hf]") {
    // tests/fixtures/hf/README.md: total and without the embedding, in billions.
    for (const auto& [name, total, body] : {std::tuple{"qwen3-0.6b", 0.6, 0.44}, std::tuple{"qwen3-8b", 8.2, 6.95}}) {
        INFO(name);
        const ModelSpec m = fixture(name);
        CHECK(m.qk_norm);
        const double n = static_cast<double>(m.param_count());
        const double without = n - static_cast<double>(m.embedding_params() + m.head_params());
        CHECK(std::round(n / 1e8) / 10 == Approx(total));
        CHECK(std::round(without / 1e7) / 100 == Approx(body));
    }
    const ModelSpec small = fixture("qwen3-0.6b");
    CHECK(small.head_dim() == 128);
    CHECK(small.q_dim() == 2048);  // not hidden_size (1024)
    CHECK(small.tied_embeddings);
    CHECK_FALSE(small.qkv_bias);
    CHECK(small.sliding_window == 0);
}

TEST_CASE("llama3 rope_scaling is read with its parameters", "[hf]") {
    const ModelSpec m = fixture("llama-3.2-1b");
    CHECK(m.rope_scaling.type == "llama3");
    CHECK(m.rope_scaling.factor == 32);
    CHECK(m.rope_scaling.low_freq_factor == 1);
    CHECK(m.rope_scaling.high_freq_factor == 4);
    CHECK(m.rope_scaling.original_context == 8192);
    CHECK(m.tied_embeddings);
    CHECK(fixture("llama-3-8b").rope_scaling.empty());  // null
}

TEST_CASE("the estimator's flat buffers hold exactly the model's parameters, padding aside", "[hf]") {
    for (const char* name : {"llama-2-7b", "qwen2-7b", "mistral-nemo-12b", "qwen2-0.5b", "qwen3-0.6b", "qwen3-8b"}) {
        INFO(name);
        const ModelSpec m = fixture(name);
        const FlatLayout f = flat_layout(m, 256);
        const std::uint64_t held = f.layer.numel * f.layer.count + f.outer.numel;
        const std::uint64_t slack = f.align * (f.layer.tensors * f.layer.count + f.outer.tensors);
        CHECK(held >= m.param_count());
        CHECK(held - m.param_count() < slack);
    }
}

TEST_CASE("head_dim, biases, tied embeddings, windows and names are read", "[hf]") {
    const ModelSpec nemo = fixture("mistral-nemo-12b");
    CHECK(nemo.head_dim() == 128);
    CHECK(nemo.q_dim() == 4096);  // not hidden_size (5120)
    CHECK(nemo.name == "mistralai/Mistral-Nemo-Base-2407");
    CHECK(nemo.sliding_window == 0);  // null: full attention

    const ModelSpec qwen = fixture("qwen2-7b");
    CHECK(qwen.qkv_bias);
    CHECK_FALSE(qwen.o_bias);
    CHECK(qwen.sliding_window == 0);  // use_sliding_window = false
    CHECK(fixture("qwen2-0.5b").tied_embeddings);
    CHECK(fixture("mistral-7b").sliding_window == 4096);

    test::ScratchDir dir;
    std::ofstream(dir.file("config.json")) << R"({"model_type": "llama", "vocab_size": 1000, "hidden_size": 64,
        "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "attention_bias": true,
        "mlp_bias": true, "rope_scaling": {"rope_type": "llama3", "factor": 8.0}})";
    const ModelSpec m = load_hf_config(dir.file("config.json"));
    CHECK(m.name == "llama");  // no _name_or_path: the model_type
    CHECK((m.qkv_bias && m.o_bias && m.mlp_bias));
    CHECK(m.rope_scaling.type == "llama3");
    CHECK(m.rope_scaling.factor == 8);
    // Biases: q, k, v, o (64 each) and gate, up (128), down (64) per layer.
    ModelSpec plain = m;
    plain.qkv_bias = plain.o_bias = plain.mlp_bias = false;
    CHECK(m.param_count() - plain.param_count() == 2 * (4 * 64 + 2 * 128 + 64));
}

TEST_CASE("a field tune cannot count is an error naming it", "[hf]") {
    test::ScratchDir dir;
    std::ofstream(dir.file("config.json")) << R"({"model_type": "mistral", "vocab_size": 1000, "hidden_size": 64,
        "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "num_local_experts": 8})";
    CHECK_THROWS_WITH(load_hf_config(dir.file("config.json")),
                      Catch::Contains("\"num_local_experts\" is not supported"));
    std::ofstream(dir.file("config.json")) << R"({"model_type": "gpt2", "vocab_size": 1000})";
    CHECK_THROWS_WITH(load_hf_config(dir.file("config.json")), Catch::Contains("model_type 'gpt2'"));
}

TEST_CASE("the trainer runs the Llama-family variants and refuses, by name, what it cannot", "[hf]") {
    TrialConfig c;
    c.precision = Precision::bf16_mixed;
    c.context = 2048;
    for (const char* name : {"qwen2-7b", "qwen2.5-7b", "qwen2-0.5b", "qwen3-0.6b", "qwen3-8b", "mistral-nemo-12b",
                             "llama-3.1-8b", "llama-3.2-1b"}) {
        INFO(name);
        c.model = fixture(name);
        CHECK_FALSE(train::trainer_unsupported(c));
    }
    c.model = fixture("mistral-7b");
    c.context = 8192;
    CHECK_THAT(*train::trainer_unsupported(c), Catch::Contains("sliding_window 4096"));
    c.context = 4096;
    CHECK_FALSE(train::trainer_unsupported(c));  // the window covers the whole context: plain attention
    c.model.rope_scaling = RopeScaling{"yarn", 4.0};
    CHECK_THAT(*train::trainer_unsupported(c), Catch::Contains("rope_scaling type 'yarn'"));
}

TEST_CASE("the estimator counts biases and q/k norms", "[hf]") {
    TrialConfig c;
    c.model = fixture("qwen2-7b");
    c.precision = Precision::bf16_mixed;
    c.context = 2048;
    const Hardware hw = *find_device("h100-80gb");
    TrialConfig plain = c;
    plain.model.qkv_bias = false;
    CHECK(estimate(c, hw).memory[Component::params] > estimate(plain, hw).memory[Component::params]);
    c.model = fixture("qwen3-8b");
    plain = c;
    plain.model.qk_norm = false;
    CHECK(c.model.param_count() - plain.model.param_count() == 36 * 2 * 128);
    // The projections before the norms and their rstd are kept for backward.
    CHECK(estimate(c, hw).memory[Component::activations] > estimate(plain, hw).memory[Component::activations]);
}

TEST_CASE("a model's config.json round-trips through save_hf_model", "[hf]") {
    for (const char* name : {"qwen2-0.5b", "qwen3-0.6b", "llama-3.2-1b", "mistral-nemo-12b"}) {
        INFO(name);
        ModelSpec m = fixture(name);
        m.layers = 1, m.vocab = 64;  // small weights; the fields under test stay
        const train::ParamLayout layout = train::make_param_layout(m, 1, 256);
        test::ScratchDir dir;
        const std::filesystem::path folder(dir.file("model"));
        train::save_hf_model(folder, m, layout, train::random_init(layout, 1));
        ModelSpec back = train::load_hf_config(folder);
        back.name = m.name;
        CHECK(back == m);
        CHECK(train::load_hf_weights(folder, layout).size() == layout.buffers());
    }
}

TEST_CASE("the Llama 3.x and Qwen presets are their config.json", "[hf]") {
    for (const auto& [preset, name] :
         {std::pair{"llama3.1-8b", "llama-3.1-8b"}, std::pair{"llama3.2-1b", "llama-3.2-1b"},
          std::pair{"qwen2.5-7b", "qwen2.5-7b"}, std::pair{"qwen3-8b", "qwen3-8b"}}) {
        INFO(preset);
        const ModelSpec p = *find_model(preset);
        ModelSpec f = fixture(name);
        f.name = p.name;
        CHECK(p == f);
    }
}
