// Fuzz group (label fuzz): seeded random mutations of the example sweep files,
// of a config.json and of safetensors headers, run through `tune validate`,
// `tune estimate` and `tune trial --steps 1` on the tiny fixture model, under
// the rules of tests/fuzz/fuzzer.h. The seeds are fixed, so a failure
// reproduces.
#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tests/fuzz/fuzzer.h"

namespace fs = std::filesystem;
using namespace tune::fuzz;

TEST_CASE("fuzz: mutated sweep files through validate and estimate", "[fuzz]") {
    Fuzzer f("sweeps");
    std::vector<std::string> seeds{slurp(kSource / "sweeps/demo.toml"), slurp(kSource / "sweeps/llama7b.toml")};
    for (const auto& e : fs::directory_iterator(kSource / "tests/sweeps_bad")) seeds.push_back(slurp(e.path()));
    Mutator m(20240611);
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < 240; ++i) {
        const fs::path file = f.dir / fmt::format("s{}.toml", i);
        spit(file, m.mutate(seeds[m.below(seeds.size())]));
        f.run({"validate", file.string()}, file);
        if (i % 3 == 0) f.run({"estimate", file.string()}, file);
    }
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    WARN(fmt::format("{} runs in {:.1f} s", f.runs, took));
}

TEST_CASE("fuzz: mutated config.json through validate (hf_config) and tune trial --init", "[fuzz]") {
    Fuzzer f("config");
    const std::string config = slurp(kTiny / "config.json");
    const nlohmann::json parsed = nlohmann::json::parse(config);
    Mutator m(77031);
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < 90; ++i) {
        const fs::path model = f.dir / fmt::format("m{}", i);
        fs::create_directories(model);
        const std::string text = i % 2 == 0 ? m.mutate(config) : m.mutate_json(parsed).dump(2);
        spit(model / "config.json", text);
        fs::copy_file(kTiny / "model.safetensors", model / "model.safetensors");
        spit(model / "sweep.toml",
             "[model]\nhf_config = \"config.json\"\n[hardware]\ndevice = \"cpu\"\n[space]\ncontext = [16]\n");
        f.run({"validate", (model / "sweep.toml").string()}, model);
        if (i % 3 == 0)
            f.run({"trial", "--init", model.string(), "--steps", "1", "--warmup", "0", "--context", "16", "--threads",
                   "1"},
                  model, true);
    }
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    WARN(fmt::format("{} runs in {:.1f} s", f.runs, took));
}

TEST_CASE("fuzz: mutated safetensors headers through tune trial --init", "[fuzz]") {
    Fuzzer f("safetensors");
    const std::string file = slurp(kTiny / "model.safetensors");
    Mutator m(5150);
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < 30; ++i) {
        const fs::path model = f.dir / fmt::format("w{}", i);
        fs::create_directories(model);
        fs::copy_file(kTiny / "config.json", model / "config.json");
        spit(model / "model.safetensors", mutated_safetensors(m, file, i));
        f.run({"trial", "--init", model.string(), "--steps", "1", "--warmup", "0", "--context", "16", "--threads", "1"},
              model, true);
    }
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    WARN(fmt::format("{} runs in {:.1f} s", f.runs, took));
}
