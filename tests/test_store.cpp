// The results store: round trips, schema migration, resume semantics, the
// Pareto view, best-fit ranking and hostile strings.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <random>
#include <set>
#include <thread>

#include <sqlite3.h>

#include "cli/trial_command.h"
#include "core/units.h"
#include "store/best.h"
#include "store/record_json.h"
#include "store/schema.h"
#include "store/store.h"
#include "tests/support/run_command.h"
#include "tests/test_store_support.h"

using namespace tune;
using tune::test::sample_config;
using tune::test::sample_estimate;
using tune::test::sample_result;
using tune::test::sample_sweep;
using tune::test::ScratchDir;

namespace {

constexpr auto kRw = Store::Mode::read_write;
constexpr auto kRo = Store::Mode::read_only;

Timestamp at(std::int64_t ms) { return Timestamp{std::chrono::milliseconds{ms}}; }

// Records an ok result with the given throughput and peak for config i; returns the trial id.
TrialId measured(Store& db, SweepId sweep, TrialConfig c, double tokens_per_s, std::uint64_t peak) {
    db.add_trials(sweep, std::vector<NewTrial>{{c, TrialStatus::pending, "", std::nullopt, 0, {}}});
    auto claimed = db.claim_next_pending(sweep);
    REQUIRE(claimed);
    TrialResult r = sample_result(claimed->config, 0);
    r.tokens_per_s = tokens_per_s;
    r.memory.peak = peak;
    db.record_result(claimed->id, r, "", at(1000), at(2000));
    return claimed->id;
}

}  // namespace

TEST_CASE("a new database is created at the current schema version in WAL mode", "[store]") {
    ScratchDir dir;
    Store db(dir.file("t.db"), kRw);
    CHECK(db.schema_version() == kSchemaVersion);
    CHECK(db.check_integrity() == "ok");
    CHECK(std::filesystem::exists(dir.file("t.db-wal")));
    CHECK(db.sweeps().empty());
}

TEST_CASE("an opener waits out another connection's lock instead of failing at its first read", "[store]") {
    // Parallel `tune export`s met WAL recovery's lock at the schema check, before the
    // busy timeout was set, and failed with "database is locked". An exclusive lock in
    // rollback-journal mode makes the same wait certain.
    ScratchDir dir;
    const std::string path = dir.file("t.db");
    { Store db(path, kRw); }
    sqlite3* raw = nullptr;
    REQUIRE(sqlite3_open(path.c_str(), &raw) == SQLITE_OK);
    REQUIRE(sqlite3_exec(raw, "PRAGMA journal_mode = DELETE; BEGIN EXCLUSIVE", nullptr, nullptr, nullptr) == SQLITE_OK);
    const auto start = std::chrono::steady_clock::now();
    std::thread release([raw] {
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        sqlite3_exec(raw, "COMMIT", nullptr, nullptr, nullptr);
    });
    std::optional<Store> reader;
    CHECK_NOTHROW(reader.emplace(Store::open_reader(path)));
    release.join();
    CHECK(std::chrono::steady_clock::now() - start >= std::chrono::milliseconds(250));
    if (reader) CHECK(reader->schema_version() == kSchemaVersion);
    sqlite3_close(raw);
}

TEST_CASE("every sweep field round-trips", "[store]") {
    ScratchDir dir;
    const SweepRecord record = sample_sweep("roundtrip");
    {
        Store db(dir.file("t.db"), kRw);
        auto opened = db.open_sweep(record, false);
        CHECK(opened.created);
    }
    Store reader(dir.file("t.db"), kRo);
    auto found = reader.find_sweep("roundtrip");
    REQUIRE(found);
    CHECK(found->record == record);
    CHECK(found->total() == 0);
}

TEST_CASE("every trial field round-trips: enumerated, claimed, recorded", "[store]") {
    ScratchDir dir;
    Store db(dir.file("t.db"), kRw);
    const SweepId sweep = db.open_sweep(sample_sweep("s"), false).id;
    const std::vector<NewTrial> enumerated{
        {sample_config(0), TrialStatus::pending, "", sample_estimate(0), 2.5, {}},
        {sample_config(1), TrialStatus::invalid, "lomo cannot accumulate gradients", std::nullopt, 0, {}},
        {sample_config(2), TrialStatus::pruned, "predicted peak 90 GiB > 76 GiB", sample_estimate(2), 9, {}},
    };
    CHECK(db.add_trials(sweep, enumerated) == 3);

    auto all = db.trials({sweep, std::nullopt, true, true});
    REQUIRE(all.size() == 3);
    for (std::size_t i = 0; i < 3; ++i) {
        CHECK(all[i].result.config == enumerated[i].config);
        CHECK(all[i].config_hash == config_hash(enumerated[i].config));
        CHECK(all[i].result.status == enumerated[i].status);
        CHECK(all[i].result.reason == enumerated[i].reason);
        CHECK(all[i].result.estimate == enumerated[i].estimate);
        CHECK(all[i].priority == enumerated[i].priority);
        CHECK_FALSE(all[i].measured);
        CHECK(all[i].sweep_name == "s");
    }

    auto claimed = db.claim_next_pending(sweep);
    REQUIRE(claimed);
    CHECK(claimed->id == all[0].id);
    CHECK(claimed->config == enumerated[0].config);
    CHECK(claimed->estimate == enumerated[0].estimate);
    CHECK(claimed->attempts == 1);
    CHECK(db.trial(claimed->id)->result.status == TrialStatus::running);

    TrialResult result = sample_result(claimed->config, 5);
    const std::string tail = "step 3 loss 4.875\nwarning: something\n";
    db.record_result(claimed->id, result, tail, at(1'790'000'001'000), at(1'790'000'009'250));
    auto back = db.trial(claimed->id);
    REQUIRE(back);
    CHECK(back->result == result);
    CHECK(back->measured);
    CHECK(back->stderr_tail == tail);
    CHECK(back->started_at == at(1'790'000'001'000));
    CHECK(back->ended_at == at(1'790'000'009'250));
    CHECK(back->attempts == 1);
    // Steps after the 2 warmup: 20, 21, 22, 28 ms -> median 21.5 ms.
    REQUIRE(back->median_step_s);
    CHECK(*back->median_step_s == Approx(0.0215));
    CHECK_FALSE(db.claim_next_pending(sweep));  // the others are invalid and pruned
}

TEST_CASE("a result without an estimate keeps the enumerated one, NaN losses stay NaN", "[store]") {
    ScratchDir dir;
    Store db(dir.file("t.db"), kRw);
    const SweepId sweep = db.open_sweep(sample_sweep("s"), false).id;
    db.add_trials(sweep,
                  std::vector<NewTrial>{{sample_config(3), TrialStatus::pending, "", sample_estimate(3), 0, {}}});
    auto claimed = db.claim_next_pending(sweep);
    TrialResult r = sample_result(claimed->config, 3);
    r.status = TrialStatus::failed;
    r.reason = "loss became NaN at step 2";
    r.estimate.reset();
    r.losses = {5.0, std::nan(""), std::nan("")};
    r.step_ms.clear();
    for (int i = 0; i < 19; ++i) r.step_ms.push_back(10 + 0.5 * i);  // more steps than one insert holds
    db.record_result(claimed->id, r, "", at(0), at(1));
    auto back = db.trial(claimed->id)->result;
    CHECK(back.estimate == sample_estimate(3));
    REQUIRE(back.losses.size() == 3);
    CHECK(back.losses[0] == 5.0);
    CHECK(std::isnan(back.losses[1]));
    CHECK(std::isnan(back.losses[2]));
    CHECK(back.step_ms == r.step_ms);
    CHECK(back.reason == r.reason);
}

TEST_CASE("adding trials is idempotent by config hash", "[store]") {
    ScratchDir dir;
    Store db(dir.file("t.db"), kRw);
    const SweepId sweep = db.open_sweep(sample_sweep("s"), false).id;
    test::add_pending(db, sweep, 0, 10);
    std::vector<NewTrial> again;
    for (int i = 5; i < 15; ++i) again.push_back({sample_config(i), TrialStatus::pending, "", std::nullopt, 0, {}});
    CHECK(db.add_trials(sweep, again) == 5);
    CHECK(db.find_sweep("s")->count(TrialStatus::pending) == 15);
    // The same configuration in another sweep is another trial.
    const SweepId other = db.open_sweep(sample_sweep("t"), false).id;
    CHECK(db.add_trials(other, again) == 10);
    // Only enumeration statuses are accepted.
    std::vector<NewTrial> bad{{sample_config(99), TrialStatus::ok, "", std::nullopt, 0, {}}};
    CHECK_THROWS_AS(db.add_trials(sweep, bad), StoreError);
}

TEST_CASE("reopening a sweep: same spec continues, a changed spec is refused, restart starts over", "[store]") {
    ScratchDir dir;
    Store db(dir.file("t.db"), kRw);
    const auto first = db.open_sweep(sample_sweep("s", "spec A"), false);
    test::add_pending(db, first.id, 0, 4);

    auto again = db.open_sweep(sample_sweep("s", "spec A"), false);
    CHECK_FALSE(again.created);
    CHECK(again.id == first.id);

    try {
        db.open_sweep(sample_sweep("s", "spec B"), false);
        FAIL("a changed spec was accepted");
    } catch (const SpecChangedError& e) {
        const std::string message = e.what();
        CHECK_THAT(message, Catch::Contains("'s'") && Catch::Contains("new name") && Catch::Contains("--restart"));
    }
    CHECK(db.find_sweep("s")->total() == 4);  // the refused open changed nothing

    auto restarted = db.open_sweep(sample_sweep("s", "spec B"), true);
    CHECK(restarted.created);
    CHECK(db.find_sweep("s")->total() == 0);
    CHECK(db.find_sweep("s")->record.spec_text == "spec B");
    CHECK(db.trials({}).empty());  // the old trials went with their sweep
    CHECK(db.check_integrity() == "ok");
}

TEST_CASE("trials left running go back to pending, and fail after three attempts", "[store]") {
    ScratchDir dir;
    Store db(dir.file("t.db"), kRw);
    const SweepRecord record = sample_sweep("s");
    const SweepId sweep = db.open_sweep(record, false).id;
    test::add_pending(db, sweep, 0, 1);
    for (std::uint32_t attempt = 1; attempt <= kMaxAttempts; ++attempt) {
        auto claimed = db.claim_next_pending(sweep);
        REQUIRE(claimed);
        CHECK(claimed->attempts == attempt);
        // The driver dies here; the next driver opens the sweep.
        auto reopened = db.open_sweep(record, false);
        if (attempt < kMaxAttempts) {
            CHECK(reopened.requeued.pending == 1);
            CHECK(db.trial(claimed->id)->result.status == TrialStatus::pending);
        } else {
            CHECK(reopened.requeued.failed == 1);
            auto t = db.trial(claimed->id);
            CHECK(t->result.status == TrialStatus::failed);
            CHECK_THAT(t->result.reason, Catch::Contains("3 times"));
        }
    }
    CHECK_FALSE(db.claim_next_pending(sweep));
}

TEST_CASE("claim order, release and re-estimates of pending trials", "[store]") {
    ScratchDir dir;
    Store db(dir.file("t.db"), kRw);
    const SweepId sweep = db.open_sweep(sample_sweep("s"), false).id;
    std::vector<NewTrial> trials;
    for (int i = 0; i < 3; ++i) {
        Estimate e = sample_estimate(i);
        e.tokens_per_s = 100.0 * (i == 1 ? 3 : 1 + i % 2);                               // trial 1 fastest
        e.memory.peak = 1000u - static_cast<std::uint64_t>(i) * 100;                     // trial 2 smallest
        trials.push_back({sample_config(i), TrialStatus::pending, "", e, 3.0 - i, {}});  // trial 2 first by priority
    }
    db.add_trials(sweep, trials);
    const auto ids = db.trials({sweep, std::nullopt, true, false});
    CHECK(db.claim_next_pending(sweep, ClaimOrder::priority)->id == ids[2].id);
    CHECK(db.claim_next_pending(sweep, ClaimOrder::estimated_fastest)->id == ids[1].id);
    db.release(ids[1].id, "interrupted by the user");
    CHECK(db.trial(ids[1].id)->result.status == TrialStatus::pending);
    CHECK(db.trial(ids[1].id)->result.reason == "interrupted by the user");
    CHECK(db.trial(ids[1].id)->attempts == 0);  // the claim's attempt is given back

    Estimate reestimated = sample_estimate(7);
    db.update_pending(std::vector<PendingUpdate>{
        {ids[0].id, reestimated, 0.5, TrialStatus::pruned, "recalibrated peak exceeds the limit", {}},
        {ids[2].id, reestimated, 0.5, TrialStatus::pruned, "running trials are left alone", {}}});
    auto t0 = db.trial(ids[0].id);
    CHECK(t0->result.status == TrialStatus::pruned);
    CHECK(t0->result.estimate == reestimated);
    CHECK(db.trial(ids[2].id)->result.status == TrialStatus::running);
    CHECK(db.claim_next_pending(sweep, ClaimOrder::estimated_smallest)->id == ids[1].id);
    CHECK_FALSE(db.claim_next_pending(sweep));
}

TEST_CASE("the Pareto front view keeps exactly the non-dominated ok trials", "[store]") {
    ScratchDir dir;
    Store db(dir.file("t.db"), kRw);
    const SweepId sweep = db.open_sweep(sample_sweep("s"), false).id;
    // (tokens/s, peak): a, b, c on the front; d dominated by b; e equal to c (both stay).
    const std::vector<std::pair<double, std::uint64_t>> points{{100, 10}, {200, 20}, {300, 40}, {150, 25}, {300, 40}};
    std::vector<TrialId> ids;
    for (std::size_t i = 0; i < points.size(); ++i)
        ids.push_back(measured(db, sweep, sample_config(static_cast<int>(i)), points[i].first, points[i].second));
    // An oom with a tiny peak must not enter the front.
    db.add_trials(sweep, std::vector<NewTrial>{{sample_config(50), TrialStatus::pending, "", std::nullopt, 0, {}}});
    auto oom = db.claim_next_pending(sweep);
    TrialResult r = sample_result(oom->config, 0);
    r.status = TrialStatus::oom;
    r.memory.peak = 1;
    r.tokens_per_s = 1e9;
    db.record_result(oom->id, r, "", at(0), at(1));

    auto front = db.pareto_front(sweep);
    std::vector<TrialId> got;
    for (const auto& t : front) got.push_back(t.id);
    CHECK(got == std::vector<TrialId>{ids[0], ids[1], ids[2], ids[4]});
}

TEST_CASE("the Pareto front view equals a brute-force front on random points with ties", "[store]") {
    ScratchDir dir;
    Store db(dir.file("t.db"), kRw);
    const SweepId sweep = db.open_sweep(sample_sweep("s"), false).id;
    std::mt19937 rng(7);
    std::uniform_int_distribution<int> peak(1, 40), speed(1, 40);  // few values: many ties
    std::vector<std::pair<double, std::uint64_t>> points;
    std::vector<TrialId> ids;
    for (int i = 0; i < 300; ++i) {
        points.emplace_back(10.0 * speed(rng), static_cast<std::uint64_t>(1000 * peak(rng)));
        ids.push_back(measured(db, sweep, sample_config(i), points.back().first, points.back().second));
    }
    std::set<TrialId> expected;
    for (std::size_t a = 0; a < points.size(); ++a) {
        bool dominated = false;
        for (std::size_t b = 0; b < points.size() && !dominated; ++b)
            dominated = points[b].second <= points[a].second && points[b].first >= points[a].first &&
                        (points[b].second < points[a].second || points[b].first > points[a].first);
        if (!dominated) expected.insert(ids[a]);
    }
    std::set<TrialId> got;
    for (const auto& t : db.pareto_front(sweep)) got.insert(t.id);
    CHECK(got == expected);
    CHECK(expected.size() > 1);
}

TEST_CASE("best ranks by the chosen metric under constraints, with ties settled", "[store][best]") {
    ScratchDir dir;
    Store db(dir.file("t.db"), kRw);
    const SweepId sweep = db.open_sweep(sample_sweep("s"), false).id;
    auto config = [](Optimizer o, std::uint32_t context, std::uint32_t gpus, int i) {
        TrialConfig c = sample_config(i);
        c.optimizer = o;
        c.context = context;
        c.world_size = gpus;
        return c;
    };
    const TrialId a = measured(db, sweep, config(Optimizer::adamw, 2048, 8, 1), 1000, 50 * GiB);
    const TrialId b = measured(db, sweep, config(Optimizer::lion, 4096, 8, 2), 1000, 40 * GiB);  // ties a, less memory
    const TrialId c = measured(db, sweep, config(Optimizer::adamw, 4096, 4, 3), 800, 30 * GiB);
    const TrialId d = measured(db, sweep, config(Optimizer::lomo, 8192, 8, 4), 800, 30 * GiB);  // ties c entirely
    const TrialId e = measured(db, sweep, config(Optimizer::adamw, 8192, 8, 5), 2000, 70 * GiB);

    auto ids = [](const BestAnswer& answer) {
        std::vector<TrialId> out;
        for (const auto& t : answer.ranked) out.push_back(t.id);
        return out;
    };
    BestQuery q;
    CHECK(ids(find_best(db, q)) == std::vector<TrialId>{e, b, a, c, d});
    // a uses more memory than b for the same speed; c and d tie, so neither dominates the other.
    CHECK(find_best(db, q).on_front == std::vector<bool>{true, true, false, true, true});
    q.max_memory = 45 * GiB;
    CHECK(ids(find_best(db, q)) == std::vector<TrialId>{b, c, d});
    q.min_context = 8192;
    CHECK(ids(find_best(db, q)) == std::vector<TrialId>{d});
    q = {};
    q.gpus = 4;
    CHECK(ids(find_best(db, q)) == std::vector<TrialId>{c});
    q = {};
    q.equal = {{0, static_cast<DimValue>(Optimizer::adamw)}};
    q.top = 2;
    auto top2 = find_best(db, q);
    CHECK(ids(top2) == std::vector<TrialId>{e, a});
    CHECK(top2.qualifying == 3);
    q = {};
    q.by = BestBy::peak_memory;
    CHECK(ids(find_best(db, q)) == std::vector<TrialId>{c, d, b, a, e});
    q.sweep = "s";
    CHECK(find_best(db, q).measured_ok == 5);
    q.sweep = "nope";
    CHECK_THROWS_AS(find_best(db, q), ConfigError);
}

TEST_CASE("best says why nothing qualifies", "[store][best]") {
    ScratchDir dir;
    Store db(dir.file("t.db"), kRw);
    const SweepId sweep = db.open_sweep(sample_sweep("s"), false).id;
    db.add_trials(sweep,
                  std::vector<NewTrial>{{sample_config(10), TrialStatus::pruned, "too big", std::nullopt, 0, {}},
                                        {sample_config(11), TrialStatus::pruned, "too big", std::nullopt, 0, {}}});

    BestQuery q;
    auto none = find_best(db, q);
    CHECK(none.ranked.empty());
    REQUIRE(none.why_none.size() == 1);
    CHECK_THAT(none.why_none[0], Catch::Contains("no trial has finished ok") && Catch::Contains("2 pruned"));

    TrialConfig small = sample_config(1);
    small.context = 1024;
    measured(db, sweep, small, 500, 52 * GiB);
    TrialConfig big = sample_config(2);
    big.context = 4096;
    measured(db, sweep, big, 900, 60 * GiB);

    q.max_memory = 40 * GiB;
    none = find_best(db, q);
    REQUIRE(none.why_none.size() == 1);
    CHECK_THAT(none.why_none[0],
               Catch::Contains("40.00 GiB") && Catch::Contains("smallest measured peak is 52.00 GiB"));

    // Each constraint alone is met, together not: explained among the trials meeting the other.
    q.max_memory = 55 * GiB;
    q.min_context = 2048;
    none = find_best(db, q);
    CHECK(none.ranked.empty());
    REQUIRE(none.why_none.size() == 2);
    CHECK_THAT(none.why_none[0], Catch::Contains("smallest measured peak is 60.00 GiB"));
    CHECK_THAT(none.why_none[1], Catch::Contains("the longest measured is 1024"));

    q = {};
    q.gpus = 64;
    q.equal = {{0, static_cast<DimValue>(Optimizer::adafactor)}};
    none = find_best(db, q);
    REQUIRE(none.why_none.size() == 2);
    CHECK_THAT(none.why_none[0], Catch::Contains("64 GPUs"));
    CHECK_THAT(none.why_none[1], Catch::Contains("none has optimizer adafactor: measured values are adam8bit, lion"));
}

TEST_CASE("hostile strings are stored and read back verbatim", "[store]") {
    ScratchDir dir;
    const std::string hostile = std::string("it's \"quoted\"'; DROP TABLE trials; --\n\xff\xfe\xc3(") + '\0' + "tail";
    SweepRecord record = sample_sweep(hostile, hostile);
    record.host = hostile;
    record.backend = hostile;
    record.device.name = hostile;
    record.software.git_commit = hostile;
    {
        Store db(dir.file("t.db"), kRw);
        const SweepId sweep = db.open_sweep(record, false).id;
        db.add_trials(sweep,
                      std::vector<NewTrial>{{sample_config(0), TrialStatus::invalid, hostile, std::nullopt, 0, {}},
                                            {sample_config(1), TrialStatus::pending, "", std::nullopt, 0, {}}});
        auto claimed = db.claim_next_pending(sweep);
        TrialResult r = sample_result(claimed->config, 0);
        r.status = TrialStatus::failed;
        r.reason = hostile;
        r.memory.peak_phase = hostile;
        db.record_result(claimed->id, r, hostile, at(0), at(1));
    }
    Store reader(dir.file("t.db"), kRo);
    auto found = reader.find_sweep(hostile);
    REQUIRE(found);
    CHECK(found->record == record);
    auto trials = reader.trials({found->id, std::nullopt, true, false});
    REQUIRE(trials.size() == 2);
    CHECK(trials[0].result.reason == hostile);
    CHECK(trials[1].result.reason == hostile);
    CHECK(trials[1].result.memory.peak_phase == hostile);
    CHECK(trials[1].stderr_tail == hostile);
    CHECK(reader.check_integrity() == "ok");
}

TEST_CASE("a version-1 database migrates forward with its data", "[store][migration]") {
    ScratchDir dir;
    const std::string copy = dir.file("v1.db");
    std::filesystem::copy_file(std::string(TUNE_SOURCE_DIR) + "/tests/fixtures/store_v1.db", copy);

    auto check_contents = [](const Store& db) {
        auto sweep = db.find_sweep("legacy-v1");
        REQUIRE(sweep);
        CHECK(sweep->record.host == "oldhost");
        CHECK(sweep->record.device == DeviceInfo{"cpu", 2, 8 * GiB});
        CHECK(sweep->record.software.tune_version == "0.0.9");
        CHECK(sweep->record.software.git_commit.empty());
        CHECK(sweep->record.created_at == *parse_timestamp("2026-01-02T03:04:05.678Z"));
        CHECK(sweep->count(TrialStatus::ok) == 1);
        CHECK(sweep->count(TrialStatus::oom) == 1);
        CHECK(sweep->count(TrialStatus::pending) == 1);
        auto trials = db.trials({sweep->id, std::nullopt, true, true});
        REQUIRE(trials.size() == 3);
        const TrialResult& ok = trials[0].result;
        CHECK(ok.step_ms == std::vector<double>{10.5, 11.0, 12.0, 12.25});
        CHECK(ok.losses == std::vector<double>{5.5, 5.25, 5.0, 4.75});
        CHECK(ok.memory[Component::params] == 110);
        CHECK(ok.memory[Component::overhead] == 118);
        CHECK(ok.estimate->memory[Component::grads] == 102);
        CHECK(ok.tokens_per_s == 1900.5);
        CHECK(ok.rank_peaks == std::vector<std::uint64_t>{1100});
        // Version 6 renamed step_s to median_step_s (kept as recorded) and filled the noise
        // from the stored steps after the warm-up step: 11.0, 12.0, 12.25 ms.
        CHECK(trials[0].median_step_s == 0.0115);
        CHECK(trials[0].timed_steps == 3);
        REQUIRE(trials[0].mean_step_s);
        CHECK(*trials[0].mean_step_s == Approx(0.01175));
        CHECK(*trials[0].stddev_step_s == Approx(step_statistics({11.0, 12.0, 12.25}, 0).stddev_ms / 1e3));
        CHECK(*trials[0].step_cv == Approx(*trials[0].stddev_step_s / 0.01175));
        CHECK(trials[1].timed_steps == 0);  // oom: nothing timed
        CHECK_FALSE(trials[1].mean_step_s);
        CHECK(ok.config.optimizer == Optimizer::adamw);
        CHECK(trials[0].attempts == 0);
        CHECK(trials[1].result.oom_requested == 4096);
        CHECK(trials[1].result.step_ms == std::vector<double>{20.0});
        CHECK(trials[1].result.losses.empty());
        CHECK_FALSE(trials[2].measured);
        CHECK(trials[2].result.estimate->tokens_per_s == 4000.0);
        CHECK(db.pareto_front(sweep->id).size() == 1);
    };
    auto bytes_of = [](const std::string& path) {
        std::ifstream in(path, std::ios::binary);
        return std::string(std::istreambuf_iterator<char>(in), {});
    };
    const std::string before = bytes_of(copy);
    {
        Store reader(copy, kRo);  // reads a migrated private copy, leaves the file alone
        check_contents(reader);
    }
    CHECK(bytes_of(copy) == before);
    // The fixture's config_hash values are placeholders ('h1', ...); tune writes stable_hash(config_json),
    // which a claim checks, so the pending trial gets the hash tune would have written before it is claimed.
    const auto sql = [&](const std::string& statement) {
        return test::run_command("sqlite3 '" + copy + "' \"" + statement + "\"").output;
    };
    std::string text = sql("SELECT config_json FROM trials WHERE status = 'pending'");
    while (!text.empty() && text.back() == '\n') text.pop_back();
    sql("UPDATE trials SET config_hash = '" + stable_hash(text) + "' WHERE status = 'pending'");
    Store writer(copy, kRw);
    CHECK(writer.schema_version() == kSchemaVersion);
    check_contents(writer);
    CHECK(writer.check_integrity() == "ok");
    // The migrated database takes new work.
    auto sweep = writer.find_sweep("legacy-v1");
    auto claimed = writer.claim_next_pending(sweep->id);
    REQUIRE(claimed);
    writer.record_result(claimed->id, sample_result(claimed->config, 1), "", at(0), at(1));
    CHECK(writer.trial(claimed->id)->result == sample_result(claimed->config, 1));
}

TEST_CASE("databases this tune cannot read are refused clearly", "[store][migration]") {
    ScratchDir dir;
    { Store db(dir.file("new.db"), kRw); }
    CHECK_THROWS_WITH(Store::open_reader(dir.file("missing.db")), Catch::Contains("no results database"));
    CHECK_THROWS_AS(Store(dir.file("missing.db"), kRo), StoreError);
    {
        std::FILE* f = std::fopen(dir.file("text.db").c_str(), "w");
        std::fputs("this is not sqlite, just some text that is long enough to look like a header....", f);
        std::fclose(f);
    }
    CHECK_THROWS_AS(Store(dir.file("text.db"), kRw), StoreError);
}

TEST_CASE("store errors name the failing statement and keep SQLite's message", "[store]") {
    ScratchDir dir;
    {
        Store db(dir.file("t.db"), kRw);
        const SweepId sweep = db.open_sweep(sample_sweep("s"), false).id;
        test::add_pending(db, sweep, 0, 1);
        try {
            db.record_result(424242, sample_result(sample_config(0), 0), "", at(0), at(1));
            FAIL("recorded a trial that does not exist");
        } catch (const StoreError& e) {
            CHECK(e.statement() == "record_result");
            CHECK_THAT(e.what(), Catch::Contains("no trial with id 424242"));
        }
    }
    Store reader(dir.file("t.db"), kRo);
    try {
        test::add_pending(reader, reader.find_sweep("s")->id, 5, 1);
        FAIL("a read-only store wrote");
    } catch (const StoreError& e) {
        CHECK(e.code() == 8);  // SQLITE_READONLY
        CHECK_THAT(e.what(), Catch::Contains("readonly"));
        CHECK_FALSE(e.statement().empty());
    }
    CHECK(reader.find_sweep("s")->total() == 1);
}

TEST_CASE("the reproduction command names the preset or carries the whole config", "[store][best]") {
    TrialConfig c = sample_config(0);
    c.optimizer = Optimizer::lion;
    c.precision = Precision::bf16_mixed;
    c.zero_stage = 2;
    c.world_size = 8;
    c.memory_limit = 40 * GiB;
    CHECK(trial_command(c) ==
          "tune trial --model tiny --optimizer lion --precision bf16-mixed --zero 2 --grad-accum 1 --micro-batch 1 "
          "--context 64 --checkpointing none --gpus 8 --steps 6 --warmup 2 --seed 1000 --memory-limit 40GiB");
    c.model.name = "my 'model'";
    const std::string custom = trial_command(c);
    CHECK_THAT(custom, Catch::StartsWith("tune trial --config '{") && Catch::Contains(R"("name":"my '\''model'\''")"));
    CHECK(shell_quote("a b") == "'a b'");
    CHECK(shell_quote("plain-1.0") == "plain-1.0");
}

TEST_CASE("the step-time noise is stored beside the median and exported under the same names", "[store][noise]") {
    ScratchDir dir;
    Store db(dir.file("t.db"), kRw);
    const SweepId sweep = db.open_sweep(sample_sweep("noise"), false).id;
    TrialConfig c = sample_config(0);
    c.steps = 6;
    c.warmup = 2;
    db.add_trials(sweep, std::vector<NewTrial>{{c, TrialStatus::pending, "", sample_estimate(0), 0, {}}});
    auto claimed = db.claim_next_pending(sweep);
    REQUIRE(claimed);
    TrialResult r = sample_result(claimed->config, 0);
    r.step_ms = {50, 40, 10, 20, 30, 40};  // timed: 10, 20, 30, 40 ms
    db.record_result(claimed->id, r, "", at(0), at(1));
    const auto t = db.trial(claimed->id);
    REQUIRE(t);
    CHECK(t->timed_steps == 4);
    CHECK(*t->median_step_s == Approx(0.025));
    CHECK(*t->mean_step_s == Approx(0.025));
    CHECK(*t->stddev_step_s == Approx(std::sqrt(500.0 / 3.0) / 1e3));
    CHECK(*t->step_cv == Approx(*t->stddev_step_s / 0.025));
    const nlohmann::json j = record_json(*t);
    CHECK(j["measured"]["median_step_s"].get<double>() == Approx(0.025));
    CHECK(j["measured"]["mean_step_s"].get<double>() == Approx(0.025));
    CHECK(j["measured"]["timed_steps"].get<std::uint64_t>() == 4);
    CHECK(j["measured"]["step_cv"].get<double>() == Approx(*t->step_cv));
}

TEST_CASE("best ranks configurations without a convergence risk first and offers the risky one",
          "[store][best][risk]") {
    ScratchDir dir;
    Store db(dir.file("t.db"), kRw);
    const SweepId sweep = db.open_sweep(sample_sweep("s"), false).id;
    auto config = [](Precision p, int i) {
        TrialConfig c = sample_config(i);
        c.precision = p;
        return c;
    };
    const TrialId pure = measured(db, sweep, config(Precision::bf16, 1), 1200, 30 * GiB);  // fastest, risky
    const TrialId mixed = measured(db, sweep, config(Precision::bf16_mixed, 2), 1000, 40 * GiB);
    const TrialId fp32 = measured(db, sweep, config(Precision::fp32, 3), 500, 60 * GiB);
    auto ids = [](const BestAnswer& answer) {
        std::vector<TrialId> out;
        for (const auto& t : answer.ranked) out.push_back(t.id);
        return out;
    };
    BestQuery q;
    const BestAnswer safe = find_best(db, q);
    CHECK(ids(safe) == std::vector<TrialId>{mixed, fp32, pure});
    REQUIRE(safe.risky_alternative);
    CHECK(safe.risky_alternative->id == pure);
    CHECK(alternative_gain(safe, q.by) == "+20% tokens/s");
    CHECK(safe.on_front == std::vector<bool>{false, false, true});  // the front is over all that qualify
    q.allow_risk = true;
    const BestAnswer together = find_best(db, q);
    CHECK(ids(together) == std::vector<TrialId>{pure, mixed, fp32});
    CHECK_FALSE(together.risky_alternative);
    // By memory: pure bf16 is also the smallest; where only risky ones qualify, the best is risky, no alternative.
    q = {};
    q.by = BestBy::peak_memory;
    const BestAnswer small = find_best(db, q);
    CHECK(ids(small).front() == mixed);
    CHECK(alternative_gain(small, q.by) == "-25% peak memory");
    q.max_memory = 35 * GiB;
    const BestAnswer only = find_best(db, q);
    CHECK(ids(only) == std::vector<TrialId>{pure});
    CHECK_FALSE(only.risky_alternative);
}

TEST_CASE(
    "best under a stack: its prediction decides fit and peak, and a trial recorded without predictions keeps our "
    "engine's numbers and is counted",
    "[store][frameworks]") {
    auto pending = [](TrialId id, std::uint64_t engine_peak) {
        TrialRecord t;
        t.id = id;
        t.result.status = TrialStatus::pending;
        t.result.config = sample_config(static_cast<int>(id));
        t.result.estimate = sample_estimate(static_cast<int>(id));
        t.result.estimate->memory.peak = engine_peak;
        t.result.estimate->fits = true;
        return t;
    };
    std::vector<TrialRecord> trials{pending(1, 100), pending(2, 200), pending(3, 300), pending(4, 400)};
    trials[0].frameworks["hf-trainer"] = {0, 0, 1000, 0, 1.0, 10.0, true, ""};
    trials[1].frameworks["hf-trainer"] = {0, 0, 5000, 0, 1.0, 20.0, false, ""};  // does not fit under hf-trainer
    trials[2].frameworks["hf-trainer"].invalid = "LOMO with fp16-mixed";
    // trials[3]: recorded before predictions were kept.
    BestQuery q;
    q.framework = "hf-trainer";
    const BestAnswer a = rank_predicted(trials, q);
    CHECK(a.framework == "hf-trainer");
    CHECK(a.framework_does_not_fit == 1);
    CHECK(a.framework_cannot_run == 1);
    CHECK(a.framework_unpredicted == 1);
    REQUIRE(a.ranked.size() == 2);
    for (const TrialRecord& t : a.ranked) {
        if (t.id == 1) CHECK(t.answered_for->device == 1000);
        if (t.id == 4) CHECK_FALSE(t.answered_for);
    }
    // --max-memory reads the stack's device view: 1000 bytes leaves trial 1 out under hf-trainer.
    q.max_memory = 999;
    const BestAnswer tight = rank_predicted(trials, q);
    REQUIRE(tight.ranked.size() == 1);
    CHECK(tight.ranked.front().id == 4);
    // Every candidate left out by the stack: that is the whole answer, with the reason.
    q.max_memory.reset();
    const BestAnswer none = rank_predicted(std::vector<TrialRecord>{trials[2]}, q);
    CHECK(none.ranked.empty());
    REQUIRE(none.why_none.size() == 1);
    CHECK_THAT(none.why_none[0], Catch::Contains("answering for hf-trainer: left out 1 it cannot run (trial 3: LOMO"));
}

TEST_CASE("offload's host ledger round-trips, and best keeps what fits a node's host memory",
          "[store][best][offload]") {
    ScratchDir dir;
    Store db(dir.file("t.db"), kRw);
    const SweepId sweep = db.open_sweep(sample_sweep("s"), false).id;
    auto offloaded = [](int i, std::uint64_t host_rank) {
        TrialConfig c = sample_config(i);
        c.offload = Offload::optimizer, c.zero_stage = 2, c.world_size = 4;
        Estimate e = sample_estimate(i);
        e.host_memory[Component::master] = host_rank / 2;
        e.host_memory[Component::optim] = host_rank - host_rank / 2;
        e.host_memory.peak = host_rank;
        e.host_memory.peak_phase = "init";
        e.host_node_bytes = 4 * host_rank;
        return NewTrial{c, TrialStatus::pending, "", e, 0, {}};
    };
    const std::vector<NewTrial> enumerated{offloaded(2, 10 * GiB), offloaded(4, 40 * GiB)};  // even: predicted to fit
    REQUIRE(db.add_trials(sweep, enumerated) == 2);
    const auto all = db.trials({sweep, std::nullopt, true, true});
    REQUIRE(all.size() == 2);
    CHECK(all[0].result.estimate == enumerated[0].estimate);  // the host's ledger with the rest

    // Predicted: 40 GiB a node fits the first (4 x 10 GiB), not the second (4 x 40 GiB).
    BestQuery q;
    q.max_host_memory = 40 * GiB;
    BestAnswer predicted = find_best_predicted(db, q);
    REQUIRE(predicted.ranked.size() == 1);
    CHECK(predicted.ranked[0].id == all[0].id);

    // Measured: the host ledger of the rank with the most, and every rank's, come back as recorded.
    auto claimed = db.claim_next_pending(sweep);
    REQUIRE(claimed);
    TrialResult r = sample_result(claimed->config, 3);
    r.host_memory[Component::master] = 6 * GiB;
    r.host_memory[Component::optim] = 6 * GiB;
    r.host_memory.peak = 12 * GiB;
    r.host_memory.peak_phase = "init";
    r.rank_host_peaks = {12 * GiB, 12 * GiB, 12 * GiB, 12 * GiB};
    r.estimate = enumerated[0].estimate;
    db.record_result(claimed->id, r, "", at(1000), at(2000));
    const auto back = db.trial(claimed->id);
    REQUIRE(back);
    CHECK(back->result.host_memory == r.host_memory);
    CHECK(back->result.rank_host_peaks == r.rank_host_peaks);
    // 12 GiB on each of the estimate's four ranks a node: 48 GiB, over a 40 GiB limit.
    const BestAnswer none = find_best(db, q);
    CHECK(none.ranked.empty());
    REQUIRE(none.why_none.size() == 1);
    CHECK_THAT(none.why_none[0], Catch::Contains("of host memory per node") && Catch::Contains("48.00 GiB"));
    q.max_host_memory = 48 * GiB;
    CHECK(find_best(db, q).ranked.size() == 1);
}
