// The estimate against published training runs: for each run of
// tests/fixtures/published/published_runs.json, the measured peak memory per
// GPU (in the view its source read: allocated, reserved or device) and
// tokens/s per GPU, tune's prediction under the framework profile the run
// used, and the signed error; then the median |error|, over all runs and over
// the fully stated ones (confidence high or medium, nothing not expressible).
// Numbers, not tests: nothing here asserts on an error.
//   bench_published_runs [published_runs.json [hf-fixtures-dir]]   (--help says more)
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "core/hf_config.h"
#include "core/presets.h"
#include "estimate/estimate.h"
#include "estimate/frameworks/framework_profile.h"
#include "sweep/spec.h"

namespace {

using namespace tune;
using nlohmann::json;

struct Paths {
    std::filesystem::path runs, hf;
};

ModelSpec model_of(const std::string& name, const Paths& p) {
    if (name.starts_with("hf:")) return load_hf_config(p.hf / name.substr(3) / "config.json");
    return *find_model(name);
}

struct Errors {
    std::vector<double> memory, throughput;
};

double median_abs(std::vector<double> v) {
    if (v.empty()) return NAN;
    for (double& x : v) x = std::abs(x);
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

bool fully_stated(const json& point) {
    const std::string c = point["confidence"].get<std::string>();
    return (c == "high" || c == "medium") && point["not_expressible"].empty();
}

// Signed errors over every run, over the fully stated ones, and over the runs
// the project added itself ("origin": "project"), after the profiles' rules
// were written against the others: a check on runs the rules never saw.
struct Tally {
    Errors all, stated, added;
    void add(const json& point, double err, std::vector<double> Errors::*which) {
        (all.*which).push_back(err);
        if (fully_stated(point)) (stated.*which).push_back(err);
        if (point.value("origin", std::string()) == "project") (added.*which).push_back(err);
    }
};

void score(const json& point, const Paths& paths, bool engine_only, Tally& tally) {
    const json& t = point["tune"];
    TrialConfig c = t["config"].get<TrialConfig>();
    c.model = model_of(t["model"].get<std::string>(), paths);
    c.world_size = t["gpus"].get<std::uint32_t>();
    Hardware hw = *find_device(t["device"].get<std::string>());
    hw.gpus_per_node = t["gpus_per_node"].get<std::uint32_t>();
    hw.nodes = (c.world_size + hw.gpus_per_node - 1) / hw.gpus_per_node;
    const std::string name = t["framework"].get<std::string>();
    const FrameworkProfile profile =
        engine_only ? FrameworkProfile::tune : parse_framework_profile(name).value_or(FrameworkProfile::tune);
    EstimateOptions o;
    // The bitsandbytes the run used, where its QLoRA rules depend on it.
    if (t.contains("bitsandbytes")) o.libraries.bitsandbytes = parse_version(t["bitsandbytes"].get<std::string>());
    // The LoRA dropout its script ran, which a stack's saved tensors depend on.
    o.lora_dropout = t.value("lora_dropout", 0.0);
    // The dtype its script loaded the base in (PEFT's QLoRA examples: the 4-bit storage dtype).
    if (t.contains("base_dtype")) {
        const std::string text = t["base_dtype"].get<std::string>();
        const std::optional<BaseDtype> base = parse_base_dtype(text);
        if (!base)
            throw std::invalid_argument(fmt::format("run {}: base_dtype \"{}\" is not fp32 or 16-bit",
                                                    point.value("id", std::string("?")), text));
        o.base_dtype = *base;
    }
    const FrameworkEstimate e = framework_estimate(profile, c, hw, o);
    const json& measured = point["measured"];
    std::string mem = "-", tput = "-";
    if (measured["peak_memory"].is_object()) {
        const json& m = measured["peak_memory"];
        const MemoryView view = *parse_memory_view(m["metric"].get<std::string>());
        const double want = m["bytes"].get<double>(), got = static_cast<double>(e.views[view]);
        const double err = (got - want) / want;
        tally.add(point, err, &Errors::memory);
        mem = fmt::format("{:>6.1f} GB {:>6.1f} GB {:>+7.1f}% {:<9}", want / 1e9, got / 1e9, 100 * err,
                          m["metric"].get<std::string>());
    }
    if (measured["throughput"].is_object()) {
        const double want = measured["throughput"]["value"].get<double>();
        const double got = e.tokens_per_s / c.world_size;
        const double err = (got - want) / want;
        tally.add(point, err, &Errors::throughput);
        tput = fmt::format("{:>7.0f} {:>7.0f} {:>+7.1f}%", want, got, 100 * err);
    }
    if (!engine_only)
        fmt::print("{:<34} {:<16} {:<6} {:<44} {}\n", point["id"].get<std::string>(), name,
                   fully_stated(point) ? "stated" : "-", mem, tput);
}

}  // namespace

// The fixture, read and parsed, or why not (file and reason).
std::optional<json> read_runs(const std::filesystem::path& file) {
    std::ifstream in(file);
    if (!in) {
        fmt::print(stderr, "bench_published_runs: cannot open {}\n", file.string());
        return std::nullopt;
    }
    try {
        json runs = json::parse(in);
        if (runs.contains("points") && runs["points"].is_array()) return runs;
        fmt::print(stderr, "bench_published_runs: {}: no \"points\" array\n", file.string());
    } catch (const json::parse_error& e) {
        fmt::print(stderr, "bench_published_runs: {}: {}\n", file.string(), e.what());
    }
    return std::nullopt;
}

int main(int argc, char** argv) {
    Paths paths;
    paths.runs = TUNE_SOURCE_DIR "/tests/fixtures/published/published_runs.json";
    std::string hf;
    CLI::App app{
        "tune's estimate against published training runs: each run's measured peak memory and tokens/s per GPU, "
        "tune's prediction under the run's framework profile, the signed error, and the median |error|. Prints "
        "numbers, asserts nothing."};
    app.add_option("runs", paths.runs, "the published runs (JSON with a \"points\" array)")->capture_default_str();
    app.add_option("hf-fixtures", hf, "Hugging Face config.json fixtures by model (default: ../hf beside the runs)");
    CLI11_PARSE(app, argc, argv);
    paths.hf = hf.empty() ? paths.runs.parent_path().parent_path() / "hf" : std::filesystem::path(hf);
    const std::optional<json> read = read_runs(paths.runs);
    if (!read) return 2;
    const json& runs = *read;
    fmt::print("{}: {} published runs\n", paths.runs.string(), runs["points"].size());
    fmt::print("{:<34} {:<16} {:<6} {:<44} {}\n", "run", "profile", "", "memory: measured, tune, error, view",
               "tokens/s per GPU: measured, tune, error");
    Tally profiles, engine;
    try {
        for (const json& point : runs["points"]) score(point, paths, false, profiles);
        for (const json& point : runs["points"]) score(point, paths, true, engine);
    } catch (const std::exception& e) {  // a run's field missing or malformed
        fmt::print(stderr, "bench_published_runs: {}: {}\n", paths.runs.string(), e.what());
        return 2;
    }
    const Errors &all = profiles.all, &stated = profiles.stated, &added = profiles.added;
    fmt::print("median |memory error|      {:5.1f}% over {} runs, {:5.1f}% over the {} fully stated\n",
               100 * median_abs(all.memory), all.memory.size(), 100 * median_abs(stated.memory), stated.memory.size());
    fmt::print("median |throughput error|  {:5.1f}% over {} runs, {:5.1f}% over the {} fully stated\n",
               100 * median_abs(all.throughput), all.throughput.size(), 100 * median_abs(stated.throughput),
               stated.throughput.size());
    if (!added.memory.empty()) {
        const auto [lo, hi] = std::minmax_element(added.memory.begin(), added.memory.end());
        fmt::print(
            "runs the project added: median |memory error| {:5.1f}% over {}, from {:+.1f}% to {:+.1f}% (engine alone "
            "{:.1f}%)\n",
            100 * median_abs(added.memory), added.memory.size(), 100 * *lo, 100 * *hi,
            100 * median_abs(engine.added.memory));
    }
    fmt::print("tune's engine alone (no profile): memory {:5.1f}% ({:5.1f}% fully stated), throughput {:5.1f}%\n",
               100 * median_abs(engine.all.memory), 100 * median_abs(engine.stated.memory),
               100 * median_abs(engine.all.throughput));
    const auto low = std::count_if(stated.memory.begin(), stated.memory.end(), [](double e) { return e < -0.10; });
    fmt::print("fully stated runs predicted more than 10% low on memory: {}\n", low);
    return 0;
}
