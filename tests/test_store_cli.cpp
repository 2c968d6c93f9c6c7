// `tune list`, `tune best` and `tune export` on databases built through the store.
#include <catch2/catch.hpp>

#include <set>

#include <nlohmann/json.hpp>

#include "core/units.h"
#include "store/store.h"
#include "tests/support/run_command.h"
#include "tests/test_store_support.h"

using namespace tune;
using tune::test::run_tune;

namespace {

const std::string kHostile = "say \"hi\", then\nbye; it's '; DROP TABLE trials; --";

// Two ok trials (one with a hostile reason-free stderr tail), one oom with a hostile reason, one pending.
void build(const std::string& path) {
    Store db(path, Store::Mode::read_write);
    const SweepId sweep = db.open_sweep(test::sample_sweep("cli"), false).id;
    test::add_pending(db, sweep, 0, 4);
    for (int i = 0; i < 3; ++i) {
        auto claimed = db.claim_next_pending(sweep);
        TrialResult r = test::sample_result(claimed->config, i);
        r.memory.peak = (10 + 10 * static_cast<std::uint64_t>(i)) * GiB;
        r.tokens_per_s = 1000.0 * (i + 1);
        if (i == 2) {
            r.status = TrialStatus::oom;
            r.reason = kHostile;
        }
        db.record_result(claimed->id, r, kHostile, now_timestamp(), now_timestamp());
    }
}

}  // namespace

TEST_CASE("tune list shows each sweep with its counts", "[store][cli]") {
    test::ScratchDir dir;
    build(dir.file("r.db"));
    auto out = run_tune("list --db " + dir.file("r.db"));
    REQUIRE(out.exit_code == 0);
    CHECK_THAT(out.output, Catch::Contains("cli") && Catch::Contains("pending") && Catch::Contains("oom"));
    auto json = run_tune("list --json --db " + dir.file("r.db"));
    REQUIRE(json.exit_code == 0);
    auto j = nlohmann::json::parse(json.output);
    CHECK(j[0]["counts"]["ok"] == 2);
    CHECK(j[0]["counts"]["oom"] == 1);
    CHECK(j[0]["counts"]["pending"] == 1);
    CHECK(j[0]["device"]["count"] == 8);
}

TEST_CASE("tune best prints the winner, the runners-up and the command that reproduces it", "[store][cli]") {
    test::ScratchDir dir;
    build(dir.file("r.db"));
    auto out = run_tune("best --db " + dir.file("r.db"));
    REQUIRE(out.exit_code == 0);
    CHECK_THAT(out.output, Catch::Contains("tune trial --model tiny --optimizer lion"));
    CHECK_THAT(out.output,
               Catch::Contains("2.00K") && Catch::Contains("1.00K"));  // tokens/s, scaled (reports/report_format)

    auto json = run_tune("best --json --max-memory 15GiB --db " + dir.file("r.db"));
    REQUIRE(json.exit_code == 0);
    auto j = nlohmann::json::parse(json.output);
    CHECK(j["best"]["measured"]["tokens_per_s"] == 1000.0);
    CHECK(j["runners_up"].empty());
    CHECK(j["command"].get<std::string>().rfind("tune trial --model tiny --optimizer adamw", 0) == 0);
}

TEST_CASE("tune best exits 1 and says why when nothing qualifies", "[store][cli]") {
    test::ScratchDir dir;
    build(dir.file("r.db"));
    auto out = run_tune("best --max-memory 5GiB --db " + dir.file("r.db"));
    CHECK(out.exit_code == 1);
    CHECK_THAT(out.output,
               Catch::Contains("Nothing qualifies") && Catch::Contains("smallest measured peak is 10.00 GiB"));
    auto json = run_tune("best --json --gpus 3 --db " + dir.file("r.db"));
    CHECK(json.exit_code == 1);
    CHECK(nlohmann::json::parse(json.output)["best"].is_null());
    CHECK(run_tune("best --db " + dir.file("missing.db")).exit_code == 2);
    CHECK(run_tune("best --sweep nope --db " + dir.file("r.db")).exit_code == 2);
    CHECK(run_tune("best --max-memory lots --db " + dir.file("r.db")).exit_code == 2);
}

TEST_CASE("tune export writes every trial as quoted CSV or as JSON", "[store][cli]") {
    test::ScratchDir dir;
    build(dir.file("r.db"));
    auto csv = run_tune("export --format csv --db " + dir.file("r.db"));
    REQUIRE(csv.exit_code == 0);
    // The hostile reason is one quoted field: quotes doubled, the comma and newline kept inside.
    CHECK_THAT(csv.output, Catch::Contains(R"(,"say ""hi"", then)"
                                           "\n"
                                           R"(bye; it's '; DROP TABLE trials; --",)"));
    CHECK_THAT(csv.output, Catch::StartsWith("sweep,trial_id,config_hash,status,reason,"));
    // Every column name once (pandas and DictReader keep only one of two equal names).
    const std::string header = csv.output.substr(0, csv.output.find('\n'));
    std::vector<std::string> names;
    for (std::size_t start = 0; start <= header.size();) {
        const std::size_t comma = std::min(header.find(',', start), header.size());
        names.push_back(header.substr(start, comma - start));
        start = comma + 1;
    }
    std::set<std::string> unique(names.begin(), names.end());
    CHECK(unique.size() == names.size());
    // The bytes the collectives moved and the communication buffers' memory are different columns.
    CHECK(unique.count("comm_bytes") == 1);
    CHECK(unique.count("memory_comm_bytes") == 1);
    CHECK(unique.count("est_memory_comm_bytes") == 1);

    auto json = run_tune("export --format json --sweep cli --db " + dir.file("r.db"));
    REQUIRE(json.exit_code == 0);
    auto j = nlohmann::json::parse(json.output);
    REQUIRE(j["trials"].size() == 4);
    CHECK(j["trials"][2]["reason"] == kHostile);
    CHECK(j["trials"][2]["stderr_tail"] == kHostile);
    CHECK(j["trials"][0]["measured"]["steps"].size() == 6);
    CHECK(j["trials"][0]["estimate"]["memory"]["params"] == 1000);
    CHECK(j["trials"][3]["measured"].is_null());
    CHECK(j["sweeps"][0]["name"] == "cli");
    CHECK(run_tune("export --db " + dir.file("r.db")).exit_code == 2);  // --format is required
}

TEST_CASE("tune export --format csv defuses cells a spreadsheet would run as formulas, numbers stay numbers",
          "[store][cli]") {
    test::ScratchDir dir;
    {
        Store db(dir.file("r.db"), Store::Mode::read_write);
        test::add_failed_trial(db, "=HYPERLINK(\"x\")", "@SUM(1+1)", "+cmd|' /C calc'!A0", 1, [](TrialResult& r) {
            r.real_peak = 100;
            r.untracked = -5;  // a negative number, not a formula
        });
    }
    const auto csv = run_tune("export --format csv --db " + dir.file("r.db"));
    REQUIRE(csv.exit_code == 0);
    INFO(csv.output);
    CHECK_THAT(csv.output, Catch::Contains("\n\"'=HYPERLINK(\"\"x\"\")\",") && Catch::Contains(",'@SUM(1+1),") &&
                               Catch::Contains("'+cmd|' /C calc'!A0") && Catch::Contains(",-5,"));
}

TEST_CASE("tune best --max-host-memory keeps what a node's host memory holds and shows each host ledger",
          "[store][cli][offload]") {
    test::ScratchDir dir;
    {
        Store db(dir.file("o.db"), Store::Mode::read_write);
        const SweepId sweep = db.open_sweep(test::sample_sweep("off"), false).id;
        for (int i = 0; i < 2; ++i) {
            TrialConfig c = test::sample_config(i);
            c.offload = Offload::optimizer, c.zero_stage = 2, c.world_size = 2;
            db.add_trials(sweep, std::vector<NewTrial>{{c, TrialStatus::pending, "", std::nullopt, 0, {}}});
            auto claimed = db.claim_next_pending(sweep);
            REQUIRE(claimed);
            TrialResult r = test::sample_result(claimed->config, i);
            r.tokens_per_s = 1000.0 * (i + 1);
            r.host_memory[Component::optim] = (4 + 4 * static_cast<std::uint64_t>(i)) * GiB;  // 4 and 8 GiB a rank
            r.host_memory.peak = r.host_memory[Component::optim];
            r.rank_host_peaks = {r.host_memory.peak, r.host_memory.peak};
            r.estimate.reset();  // two ranks a node: the trial's own
            db.record_result(claimed->id, r, "", now_timestamp(), now_timestamp());
        }
    }
    auto out = run_tune("best --max-host-memory 10GiB --db " + dir.file("o.db"));
    REQUIRE(out.exit_code == 0);
    CHECK_THAT(out.output, Catch::Contains("host") && Catch::Contains("4.00 GiB") && !Catch::Contains("8.00 GiB"));
    auto json = run_tune("best --json --max-host-memory 10GiB --db " + dir.file("o.db"));
    REQUIRE(json.exit_code == 0);
    CHECK(nlohmann::json::parse(json.output)["best"]["measured"]["host_memory"]["peak"] == 4 * GiB);
    auto none = run_tune("best --max-host-memory 4GiB --db " + dir.file("o.db"));
    CHECK(none.exit_code == 1);
    CHECK_THAT(none.output, Catch::Contains("of host memory per node") && Catch::Contains("8.00 GiB"));
    CHECK(run_tune("best --max-host-memory lots --db " + dir.file("o.db")).exit_code == 2);
}
