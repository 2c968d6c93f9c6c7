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

#include "core/dimensions.h"
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

TEST_CASE("fuzz: hostile values of every dimension's flag and [space] key through estimate and validate", "[fuzz]") {
    // The dimensions come from their table, so a new one (the pipeline's four, say) is fuzzed as it lands.
    Fuzzer f("dimensions");
    const fs::path sentinel = f.dir / "sentinel";
    const std::vector<std::string> values{"0",   "-1",   "4294967297", "nan",
                                          "inf", "1e3",  "2.5",        "",
                                          "\"",  "1f1b", "on",         "$(touch " + sentinel.string() + ")"};
    for (const tune::Dimension& d : tune::dimensions()) {
        std::vector<std::string> tried = values;
        for (std::string_view choice : d.choices) tried.emplace_back(choice);
        for (const std::string& v : tried) {
            const fs::path note = f.dir / fmt::format("{}.txt", d.name);
            spit(note, fmt::format("{} {}\n", d.flag, v));
            // Beside sizes that build a pipeline and a tensor-parallel group, so the value meets their rules too.
            std::vector<std::string> args{"estimate", "--model", "small", "--gpus", "8"};
            for (const auto& [flag, size] :
                 {std::pair{"--tensor-parallel", "2"}, {"--pipeline-parallel", "2"}, {"--grad-accum", "4"}})
                if (d.flag != flag) args.insert(args.end(), {flag, size});
            args.insert(args.end(), {std::string(d.flag), v});
            f.run(args, note);
            const fs::path sweep = f.dir / fmt::format("{}.toml", d.name);
            const std::string value =
                d.is_enum() || v.empty() || v.find_first_not_of("-0123456789.e") != std::string::npos
                    ? nlohmann::json(v).dump()
                    : v;
            spit(sweep, fmt::format("name = \"fz\"\n[model]\npreset = \"small\"\n[hardware]\ngpus = 8\n"
                                    "device = \"h100-80gb\"\n[space]\n{} = [{}]\n",
                                    d.name, value));
            f.run({"validate", sweep.string()}, sweep);
        }
    }
    CHECK_FALSE(fs::exists(sentinel));
}
