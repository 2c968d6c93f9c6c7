// Sweep files: every shipped one validates; every malformed one under
// tests/sweeps_bad/ fails with the message (and location) its header expects.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/presets.h"
#include "driver/plan.h"
#include "driver/trial_child.h"
#include "sweep/spec.h"

using namespace tune;
namespace fs = std::filesystem;

namespace {

std::string slurp(const fs::path& p) {
    std::ifstream in(p);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

// "# expect: text" and "# at: line:col" lines at the top of a fixture.
std::vector<std::string> header_values(const std::string& text, const std::string& tag) {
    std::vector<std::string> values;
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);)
        if (line.rfind(tag, 0) == 0) values.push_back(line.substr(tag.size()));
    return values;
}

std::string error_of(const fs::path& file) {
    try {
        load_sweep(file);
    } catch (const ConfigError& e) {
        return e.located();
    }
    return "(no error)";
}

}  // namespace

TEST_CASE("every sweep file shipped in sweeps/ validates", "[spec]") {
    int seen = 0;
    for (const auto& entry : fs::directory_iterator(fs::path(TUNE_SOURCE_DIR) / "sweeps")) {
        if (entry.path().extension() != ".toml") continue;
        INFO(entry.path());
        CHECK_NOTHROW(load_sweep(entry.path()));
        ++seen;
    }
    CHECK(seen >= 2);
}

namespace {

// The ```toml block under "## Sweep files" in docs/commands.md.
std::string documented_sweep_file() {
    const std::string doc = slurp(fs::path(TUNE_SOURCE_DIR) / "docs" / "commands.md");
    const std::size_t section = doc.find("## Sweep files");
    REQUIRE(section != std::string::npos);
    const std::size_t open = doc.find("```toml\n", section);
    REQUIRE(open != std::string::npos);
    const std::size_t body = open + std::string_view("```toml\n").size();
    const std::size_t close = doc.find("```", body);
    REQUIRE(close != std::string::npos);
    return doc.substr(body, close - body);
}

// The block's text from its [name] header to the next header ("": before the first).
std::string section_text(const std::string& block, std::string_view name) {
    const std::size_t start = name.empty() ? 0 : block.find("\n[" + std::string(name) + "]");
    if (start == std::string::npos) return {};
    const std::size_t end = block.find("\n[", start + 1);
    return block.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

bool names_word(const std::string& text, std::string_view word) {
    const auto part = [](char ch) { return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_'; };
    for (std::size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + 1))
        if ((at == 0 || !part(text[at - 1])) && (at + word.size() == text.size() || !part(text[at + word.size()])))
            return true;
    return false;
}

}  // namespace

// The README sends users to this block for "every key": it must name each key
// the parser takes, in its own section, and parse as a sweep file itself.
TEST_CASE("docs/commands.md's sample sweep file names every key and parses", "[spec][docs]") {
    const std::string block = documented_sweep_file();
    for (const SweepFileSection& section : sweep_file_keys()) {
        if (section.name.empty()) {
            CHECK(names_word(section_text(block, ""), "name"));
            for (std::string_view key : section.keys) {
                INFO("section [" << key << "]");
                CHECK((key == "name" || block.find("[" + std::string(key) + "]") != std::string::npos));
            }
            continue;
        }
        const std::string text = section_text(block, section.name);
        for (std::string_view key : section.keys) {
            INFO("[" << section.name << "] " << key);
            CHECK(names_word(text, key));
        }
    }
    CHECK_NOTHROW(parse_sweep(block, fs::path(TUNE_SOURCE_DIR) / "docs" / "sample.toml"));
}

TEST_CASE("malformed sweep files produce their specific messages", "[spec]") {
    std::vector<fs::path> files;
    for (const auto& entry : fs::directory_iterator(fs::path(TUNE_SOURCE_DIR) / "tests" / "sweeps_bad"))
        files.push_back(entry.path());
    std::sort(files.begin(), files.end());
    REQUIRE(files.size() >= 25);
    for (const auto& file : files) {
        const std::string text = slurp(file);
        const std::string message = error_of(file);
        INFO(file.filename().string() << " -> " << message);
        CHECK(message.rfind(file.string(), 0) == 0);  // starts with the file name
        auto expected = header_values(text, "# expect: ");
        auto expected2 = header_values(text, "# expect2: ");
        expected.insert(expected.end(), expected2.begin(), expected2.end());
        if (text.empty()) expected.push_back("the file is empty; a sweep needs at least [model] and [space]");
        REQUIRE_FALSE(expected.empty());
        for (const auto& e : expected) CHECK_THAT(message, Catch::Contains(e));
        for (const auto& at : header_values(text, "# at: "))
            CHECK_THAT(message, Catch::StartsWith(file.string() + ":" + at));
    }
}

TEST_CASE("a missing file and a directory are reported, not crashed on", "[spec]") {
    CHECK_THAT(error_of("/nonexistent/sweep.toml"),
               Catch::Equals("/nonexistent/sweep.toml: cannot open: No such file or directory"));
    CHECK_THAT(error_of(TUNE_SOURCE_DIR), Catch::Contains("is a directory, not a sweep file"));
}

TEST_CASE("a sweep file fills every section", "[spec]") {
    const SweepSpec s = load_sweep(fs::path(TUNE_SOURCE_DIR) / "sweeps" / "llama7b.toml");
    CHECK(s.name == "llama7b-h100x8");
    ModelSpec want = *find_model("llama-7b");  // with the 8k context the sweep asks for
    want.name = "llama-7b-8k";
    want.max_context = 8192;
    CHECK(s.model == want);
    CHECK(s.hardware.device == "h100-80gb");
    CHECK(s.world_size() == 8);
    CHECK(s.memory_limit() == s.hardware.memory_bytes);
    CHECK(s.space.of("optimizer").size() == 5);
    CHECK(s.space.of("precision").size() == 4);
    CHECK(s.space.of("zero_stage") == std::vector<DimValue>{0, 1, 2, 3});
    CHECK(s.trial.timeout_s == Approx(600));
    CHECK(s.budget_s == Approx(8 * 3600));
    CHECK(s.strategy == SearchStrategy::pareto_first);
    CHECK(s.report == (fs::path(TUNE_SOURCE_DIR) / "sweeps" / "llama7b-h100x8.html").string());  // beside the file
    CHECK(s.text_hash.size() == 16);
}

TEST_CASE("defaults, single values and dimension overrides", "[spec]") {
    const SweepSpec s = parse_sweep(R"(
[model]
preset = "tiny"
layers = 3
[hardware]
memory_limit = "80 GB"
[space]
optimizer = "lion"
)",
                                    "inline.toml");
    CHECK(s.name == "inline");
    CHECK(s.model.layers == 3);
    CHECK(s.model.name == "tiny-modified");
    CHECK(s.memory_limit() == 80'000'000'000ull);
    CHECK(s.space.of("optimizer") == std::vector<DimValue>{static_cast<DimValue>(Optimizer::lion)});
    CHECK(s.space.of("precision") == std::vector<DimValue>{static_cast<DimValue>(Precision::bf16_mixed)});
    CHECK(s.space.of("context") == std::vector<DimValue>{256});  // min(2048, tiny's max_context)
    CHECK(s.hardware.device == "cpu");
    CHECK(s.report == "inline.html");
}

TEST_CASE("hf_config reads a Hugging Face LlamaConfig relative to the sweep file", "[spec]") {
    const fs::path dir = fs::temp_directory_path() / "tune-test-hf" / "my-llama";
    fs::create_directories(dir);
    std::ofstream(dir / "config.json") << R"({"model_type": "llama", "hidden_size": 4096, "intermediate_size": 11008,
        "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32, "vocab_size": 32000,
        "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "max_position_embeddings": 4096, "tie_word_embeddings": false})";
    std::ofstream(dir.parent_path() / "sweep.toml") << "[model]\nhf_config = \"my-llama/config.json\"\n[space]\n";
    const SweepSpec s = load_sweep(dir.parent_path() / "sweep.toml");
    CHECK(s.model.param_count() == 6'738'415'616ull);
    CHECK(s.model.name == "llama");  // no _name_or_path: the model_type

    std::ofstream(dir / "config.json") << R"({"hidden_size": 64})";
    CHECK_THAT(error_of(dir.parent_path() / "sweep.toml"),
               Catch::Contains("missing or non-integer \"vocab_size\" (a LlamaConfig field)"));
}

TEST_CASE("an auto device resolves to what was detected, an explicit one stays", "[spec]") {
    SweepSpec s = parse_sweep("[model]\npreset = \"tiny\"\n[hardware]\ngpus = 2\n[space]\n", "a.toml");
    CHECK(s.device == "auto");
    resolve_auto_device(s, find_device("a100-80gb"));
    CHECK(s.hardware.device == "a100-80gb");
    SweepSpec t = parse_sweep("[model]\npreset = \"tiny\"\n[hardware]\ndevice = \"l40s\"\n[space]\n", "b.toml");
    resolve_auto_device(t, find_device("a100-80gb"));
    CHECK(t.hardware.device == "l40s");
    SweepSpec u = parse_sweep("[model]\npreset = \"tiny\"\n[space]\n", "c.toml");
    resolve_auto_device(u, std::nullopt);
    CHECK(u.hardware.device == "cpu");
}

TEST_CASE("a sweep file's [trial] max_cv and max_steps: more steps for a noisy trial, by default up to twice its steps",
          "[spec][noise]") {
    const SweepSpec none = parse_sweep("[model]\npreset = \"tiny\"\n[space]\noptimizer = \"adamw\"\n", "inline.toml");
    CHECK(none.trial.noise.max_cv == 0.05);
    CHECK(none.trial.noise.max_steps == 12);  // 2 x the default 6 steps
    const SweepSpec steps = parse_sweep(
        "[model]\npreset = \"tiny\"\n[space]\noptimizer = \"adamw\"\n[trial]\nsteps = 3\nwarmup = 1\n", "inline.toml");
    CHECK(steps.trial.noise.max_steps == 6);
    const SweepSpec set = parse_sweep(
        "[model]\npreset = \"tiny\"\n[space]\noptimizer = \"adamw\"\n[trial]\nsteps = 3\nwarmup = 1\nmax_cv = "
        "0.1\nmax_steps = 20\n",
        "inline.toml");
    CHECK(set.trial.noise.max_cv == 0.1);
    CHECK(set.trial.noise.max_steps == 20);
    // The driver hands them to every trial it starts.
    TrialConfig c;
    c.model = set.model;
    const auto argv = trial_argv(c, set, {"tune", "trial"});
    CHECK(std::find(argv.begin(), argv.end(), "--max-cv") != argv.end());
    CHECK(std::find(argv.begin(), argv.end(), "20") != argv.end());
}

TEST_CASE(
    "the framework section's bitsandbytes names the version its QLoRA rules follow, and unset is a current "
    "release",
    "[spec]") {
    const SweepSpec unset =
        parse_sweep("[model]\npreset = \"tiny\"\n[space]\n[framework]\nname = \"litgpt\"\n", "a.toml");
    CHECK_FALSE(unset.libraries.bitsandbytes);
    CHECK_FALSE(unset.libraries.bnb_keeps_matmul_inputs());
    const SweepSpec old = parse_sweep(
        "[model]\npreset = \"tiny\"\n[space]\n[framework]\nname = \"litgpt\"\nbitsandbytes = \"0.42.0\"\n", "b.toml");
    REQUIRE(old.libraries.bitsandbytes);
    CHECK(*old.libraries.bitsandbytes == Version{0, 42, 0});
    CHECK(old.libraries.bnb_keeps_matmul_inputs());
    // The estimator the sweep plans with takes it.
    CHECK(base_estimate_options(old).libraries.bitsandbytes == old.libraries.bitsandbytes);
}

TEST_CASE("the framework section's lora_dropout reaches the estimator, 0 unset, and a bad one names the line",
          "[spec]") {
    const std::string head = "[model]\npreset = \"tiny\"\n[space]\n[framework]\nname = \"litgpt\"\n";
    CHECK(parse_sweep(head, "a.toml").lora_dropout == 0.0);
    const SweepSpec set = parse_sweep(head + "lora_dropout = 0.05\n", "b.toml");
    CHECK(set.lora_dropout == 0.05);
    CHECK(base_estimate_options(set).lora_dropout == 0.05);
    try {
        parse_sweep(head + "lora_dropout = 1.5\n", "c.toml");
        FAIL("an out-of-range lora_dropout parsed");
    } catch (const ConfigError& e) {
        CHECK_THAT(e.located(), Catch::StartsWith("c.toml:6:") && Catch::Contains("lora_dropout: 1.5 is out of range"));
    }
    CHECK_THROWS_WITH(parse_sweep(head + "lora_dropout = \"0.1\"\n", "d.toml"), Catch::Contains("expected a number"));
}

TEST_CASE("the framework section's base_dtype reaches the estimator, fp32 unset, and a bad one names the line",
          "[spec]") {
    const std::string head = "[model]\npreset = \"tiny\"\n[space]\n[framework]\nname = \"accelerate-fsdp\"\n";
    CHECK(parse_sweep(head, "a.toml").base_dtype == BaseDtype::fp32);
    const SweepSpec set = parse_sweep(head + "base_dtype = \"16-bit\"\n", "b.toml");
    CHECK(set.base_dtype == BaseDtype::half);
    CHECK(base_estimate_options(set).base_dtype == BaseDtype::half);
    try {
        parse_sweep(head + "base_dtype = \"bfloat16\"\n", "c.toml");
        FAIL("an unknown base_dtype parsed");
    } catch (const ConfigError& e) {
        CHECK_THAT(e.located(), Catch::StartsWith("c.toml:6:") && Catch::Contains("16-bit"));
    }
}
