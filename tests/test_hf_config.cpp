// Hugging Face config.json read faithfully: the parameter totals of eight
// published models, head_dim, tied embeddings, biases, sliding windows and
// rope_scaling carried into the ModelSpec, counted by the estimator, and
// refused by the trainer by name.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "core/presets.h"
#include "harness/io/hf_model.h"
#include "search/estimate.h"
#include "search/flat_layout.h"
#include "search/spec.h"
#include "tests/test_store_support.h"

using namespace tune;

namespace {

ModelSpec fixture(const std::string& name) {
    return load_hf_config(std::filesystem::path(TUNE_SOURCE_DIR) / "tests/fixtures/hf" / name / "config.json");
}

}  // namespace

TEST_CASE("parameter counts match the published totals", "[hf]") {
    // tests/fixtures/hf/README.md names the repositories these totals come from.
    const std::vector<std::pair<std::string, std::uint64_t>> published{
        {"llama-2-7b", 6'738'415'616},   {"llama-2-13b", 13'015'864'320}, {"llama-2-70b", 68'976'648'192},
        {"llama-3-8b", 8'030'261'248},   {"llama-3-70b", 70'553'706'496}, {"mistral-7b", 7'241'732'096},
        {"qwen2-7b", 7'615'616'512},     {"mistral-nemo-12b", 12'247'782'400},
        {"qwen2-0.5b", 494'032'768}};
    for (const auto& [name, total] : published) {
        INFO(name);
        CHECK(fixture(name).param_count() == total);
    }
}

TEST_CASE("the estimator's flat buffers hold exactly the model's parameters, padding aside", "[hf]") {
    for (const char* name : {"llama-2-7b", "qwen2-7b", "mistral-nemo-12b", "qwen2-0.5b"}) {
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
    CHECK(m.rope_scaling == "llama3 factor 8");
    // Biases: q, k, v, o (64 each) and gate, up (128), down (64) per layer.
    ModelSpec plain = m;
    plain.qkv_bias = plain.o_bias = plain.mlp_bias = false;
    CHECK(m.param_count() - plain.param_count() == 2 * (4 * 64 + 2 * 128 + 64));
}

TEST_CASE("a field tune cannot count is an error naming it", "[hf]") {
    test::ScratchDir dir;
    std::ofstream(dir.file("config.json")) << R"({"model_type": "mistral", "vocab_size": 1000, "hidden_size": 64,
        "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "num_local_experts": 8})";
    CHECK_THROWS_WITH(load_hf_config(dir.file("config.json")), Catch::Contains("\"num_local_experts\" is not supported"));
    std::ofstream(dir.file("config.json")) << R"({"model_type": "gpt2", "vocab_size": 1000})";
    CHECK_THROWS_WITH(load_hf_config(dir.file("config.json")), Catch::Contains("model_type 'gpt2'"));
}

TEST_CASE("the estimator counts what the trainer refuses, by name", "[hf]") {
    TrialConfig c;
    c.model = fixture("qwen2-7b");
    c.precision = Precision::bf16_mixed;
    c.context = 2048;
    const Hardware hw = *find_device("h100-80gb");
    TrialConfig plain = c;
    plain.model.qkv_bias = false;
    CHECK(estimate(c, hw).memory[Component::params] > estimate(plain, hw).memory[Component::params]);
    REQUIRE(harness::trainer_unsupported(c));
    CHECK_THAT(*harness::trainer_unsupported(c), Catch::Contains("attention_bias"));

    c.model = fixture("mistral-nemo-12b");
    CHECK_THAT(*harness::trainer_unsupported(c), Catch::Contains("head_dim 128"));
    c.model = fixture("mistral-7b");
    c.context = 8192;
    CHECK_THAT(*harness::trainer_unsupported(c), Catch::Contains("sliding_window 4096"));
    c.context = 4096;
    CHECK_FALSE(harness::trainer_unsupported(c));  // the window covers the whole context: plain attention
    c.model = fixture("qwen2-0.5b");
    c.model.qkv_bias = false;  // else its q, k, v biases are named first
    CHECK_THAT(*harness::trainer_unsupported(c), Catch::Contains("tie_word_embeddings"));
}
