// Predicted fronts: `tune estimate FILE` and an estimate-only sweep show the
// same front, every entry of which fits; `tune best`, `list` and `report`
// answer from predictions, labelled "predicted", when nothing was measured.
#include <catch2/catch.hpp>

#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "core/units.h"
#include "reports/sweep_data.h"
#include "store/best.h"
#include "store/store.h"
#include "tests/support/run_command.h"
#include "tests/test_store_support.h"

using namespace tune;
using tune::test::run_tune;

namespace {

// Llama-2 7B on 8 H100s asked "what fits in 40 GiB?": many configurations sit just above the usable 38 GiB.
void write_sweep(const std::string& path) {
    std::ofstream(path) << R"(name = "p40"
[model]
preset = "llama-7b"
[hardware]
gpus = 8
device = "h100-80gb"
memory_limit = "40GiB"
[space]
optimizer = ["adamw", "lion", "adafactor"]
precision = ["bf16-mixed", "bf16"]
zero_stage = [1, 2, 3]
grad_accum = [1, 16]
checkpointing = ["none", "selective", "full"]
context = [2048, 4096]
micro_batch = [1, 2, 4]
)";
}

std::multiset<std::string> summaries_of(const nlohmann::json& front) {
    std::multiset<std::string> out;
    for (const auto& e : front) out.insert(summary(e["config"].get<TrialConfig>()));
    return out;
}

}  // namespace

TEST_CASE("tune estimate FILE and the estimate-only sweep print the same front, all of it fitting",
          "[cli][predicted]") {
    test::ScratchDir dir;
    write_sweep(dir.file("s.toml"));
    const auto est = run_tune("estimate --json " + dir.file("s.toml"));
    REQUIRE(est.exit_code == 0);
    const auto j = nlohmann::json::parse(est.output);
    CHECK(j["basis"] == "predicted");
    const auto usable = j["usable_memory"].get<std::uint64_t>();
    CHECK(usable == static_cast<std::uint64_t>(40.0 * GiB * 0.95));
    REQUIRE(!j["front"].empty());
    for (const auto& e : j["front"]) CHECK(e["memory"]["peak"].get<std::uint64_t>() <= usable);

    const std::string db = dir.file("r.db");
    REQUIRE(run_tune("sweep --dry-run --no-report --db " + db + " " + dir.file("s.toml")).exit_code == 0);
    const Store store(db, Store::Mode::read_only);
    const SweepData data = load_sweep_data(store, "p40");
    // Some pending trials are predicted above the usable memory (within the pruning slack): none is on the front.
    bool pending_above = false;
    for (const auto& t : data.trials)
        pending_above = pending_above || (t.result.status == TrialStatus::pending && !t.result.estimate->fits);
    CHECK(pending_above);
    std::multiset<std::string> swept;
    for (std::size_t i : data.predicted_front) {
        const auto& t = data.trials[i];
        CHECK(t.result.estimate->fits);
        CHECK(t.result.estimate->memory.peak <= usable);
        swept.insert(summary(t.result.config));
    }
    CHECK(swept == summaries_of(j["front"]));
}

TEST_CASE("best, list and report answer an estimate-only sweep with its predictions, labelled predicted",
          "[cli][predicted]") {
    test::ScratchDir dir;
    write_sweep(dir.file("s.toml"));
    const std::string db = dir.file("r.db");
    REQUIRE(run_tune("sweep --dry-run --no-report --db " + db + " " + dir.file("s.toml")).exit_code == 0);

    const auto best = run_tune("best --db " + db);
    REQUIRE(best.exit_code == 0);
    CHECK_THAT(best.output, Catch::Contains("Nothing measured qualifies") && Catch::Contains("Predicted best of") &&
                                Catch::Contains("tune trial --model llama-7b"));
    const auto bj = nlohmann::json::parse(run_tune("best --json --db " + db).output);
    CHECK(bj["best"].is_null());
    CHECK(bj["predicted"]["basis"] == "predicted");
    CHECK(bj["predicted"]["best"]["estimate"]["fits"] == true);
    CHECK(bj["predicted"]["best"]["estimate"]["peak_bytes"].get<std::uint64_t>() <= 40.0 * GiB * 0.95);
    // A constraint applies to the predicted peak.
    const auto small = nlohmann::json::parse(run_tune("best --json --max-memory 10GiB --db " + db).output);
    CHECK(small["predicted"]["best"]["estimate"]["peak_bytes"].get<std::uint64_t>() <= 10 * GiB);
    CHECK(run_tune("best --max-memory 1MiB --db " + db).exit_code == 1);

    CHECK_THAT(run_tune("list --db " + db).output, Catch::Contains("(predicted)"));
    CHECK(nlohmann::json::parse(run_tune("list --json --db " + db).output)[0]["best"]["basis"] == "predicted");

    const auto text = run_tune("report --format text --db " + db);
    REQUIRE(text.exit_code == 0);
    CHECK_THAT(text.output,
               Catch::Contains("no measured front") && Catch::Contains("Predicted Pareto front (predicted"));
    REQUIRE(run_tune("report --db " + db + " -o " + dir.file("r.html")).exit_code == 0);
    std::ifstream in(dir.file("r.html"));
    const std::string html((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    CHECK_THAT(html, Catch::Contains("Predicted Pareto front (estimates only, not measured)") &&
                         Catch::Contains("predicted peak"));
}

// Under the sweep's [framework] the readers agree: list shows the numbers best ranks by, that stack's.
TEST_CASE("list shows a framework sweep's best as best answers it, with the stack's predictions", "[cli][predicted]") {
    test::ScratchDir dir;
    write_sweep(dir.file("s.toml"));
    std::ofstream(dir.file("s.toml"), std::ios::app) << "[framework]\nname = \"torchtitan\"\n";
    const std::string db = dir.file("r.db");
    REQUIRE(run_tune("sweep --dry-run --no-report --db " + db + " " + dir.file("s.toml")).exit_code == 0);
    const auto best = nlohmann::json::parse(run_tune("best --json --db " + db).output);
    const auto& answer = best["predicted"]["best"]["framework_prediction"];
    REQUIRE(answer.is_object());
    const auto listed = nlohmann::json::parse(run_tune("list --json --db " + db).output)[0]["best"];
    CHECK(listed["basis"] == "predicted");
    CHECK(listed["peak_bytes"] == answer["device"]);
    CHECK(listed["tokens_per_s"] == answer["tokens_per_s"]);
    CHECK(listed["peak_bytes"] != best["predicted"]["best"]["estimate"]["peak_bytes"]);
}

TEST_CASE("the predicted ranking keeps only unmeasured configurations predicted to fit", "[store][predicted]") {
    std::vector<TrialRecord> trials(4);
    for (int i = 0; i < 4; ++i) {
        trials[i].id = i + 1;
        trials[i].result.config = test::sample_config(i);
        trials[i].result.status = TrialStatus::pending;
        trials[i].result.estimate = test::sample_estimate(i);
        trials[i].result.estimate->fits = true;
        trials[i].result.estimate->tokens_per_s = 100.0 * (i + 1);
    }
    trials[3].result.estimate->fits = false;    // the fastest does not fit
    trials[2].result.status = TrialStatus::ok;  // measured: the measured answer speaks for it
    trials[2].measured = true;
    const BestAnswer a = rank_predicted(trials, BestQuery{});
    CHECK(a.basis == Basis::predicted);
    REQUIRE(a.ranked.size() == 2);
    CHECK(a.ranked[0].id == 2);
    CHECK(a.ranked[1].id == 1);
}

TEST_CASE("under the sweep's framework the predicted front is that stack's: its device memory and tokens/s",
          "[cli][predicted][frameworks]") {
    test::ScratchDir dir;
    write_sweep(dir.file("s.toml"));
    std::ofstream(dir.file("s.toml"), std::ios::app) << "[framework]\nname = \"deepspeed\"\n";
    const auto est = run_tune("estimate --json " + dir.file("s.toml"));
    REQUIRE(est.exit_code == 0);
    const auto j = nlohmann::json::parse(est.output);
    CHECK(j["framework"] == "deepspeed");
    const auto usable = j["usable_memory"].get<std::uint64_t>();
    REQUIRE(!j["front"].empty());
    // Each entry fits as DeepSpeed is predicted to hold it, which is more than our engine's peak;
    // along the front, more of that memory buys more of its tokens/s.
    double previous = 0;
    for (const auto& e : j["front"]) {
        const auto& p = e["framework"]["prediction"];
        CHECK(e["framework"]["name"] == "deepspeed");
        CHECK(p["device"].get<std::uint64_t>() <= usable);
        CHECK(p["device"].get<std::uint64_t>() > e["memory"]["peak"].get<std::uint64_t>());
        CHECK(p["tokens_per_s"].get<double>() > previous);
        previous = p["tokens_per_s"].get<double>();
    }
    // The engine's own front differs: configurations that fit our engine but not DeepSpeed.
    const auto engine =
        nlohmann::json::parse(run_tune("estimate --json --framework tune " + dir.file("s.toml")).output);
    CHECK(engine["framework"] == "tune");
    CHECK(engine["fit"].get<int>() > j["fit"].get<int>());

    // The dry-run sweep keeps the same front, and every place that shows it says whose it is.
    const std::string db = dir.file("r.db");
    REQUIRE(run_tune("sweep --dry-run --no-report --db " + db + " " + dir.file("s.toml")).exit_code == 0);
    const Store store(db, Store::Mode::read_only);
    const SweepData data = load_sweep_data(store, "p40");
    std::multiset<std::string> swept;
    for (std::size_t i : data.predicted_front) swept.insert(summary(data.trials[i].result.config));
    CHECK(swept == summaries_of(j["front"]));
    CHECK_THAT(run_tune("report --format text --db " + db).output,
               Catch::Contains("deepspeed's predicted device memory per GPU") && Catch::Contains("deepspeed peak"));
    REQUIRE(run_tune("report --db " + db + " -o " + dir.file("r.html")).exit_code == 0);
    std::ifstream in(dir.file("r.html"));
    const std::string html((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    CHECK_THAT(html, Catch::Contains("deepspeed memory") && Catch::Contains("deepspeed tokens/s"));
}
