// The results database under hostile or unlucky conditions: schema versions
// tune never wrote, foreign files, read-only places, a full disk, two drivers.
// Each of these is the user's to fix, so each exits 2 with a message.
#include <catch2/catch.hpp>

#include <sqlite3.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <limits>

#include <fmt/format.h>

#include "driver/lease.h"
#include "launch/host_name.h"
#include "store/store.h"
#include "tests/support/run_command.h"
#include "tests/support/tiny_cpu_sweep.h"
#include "tests/test_store_support.h"

using namespace tune;
using tune::test::run_command;
using tune::test::run_tune;
namespace fs = std::filesystem;

namespace {

void build(const std::string& path) {
    Store db(path, Store::Mode::read_write);
    const SweepId sweep = db.open_sweep(test::sample_sweep("hostile"), false).id;
    test::add_pending(db, sweep, 0, 2);
}

std::string run_sql(const std::string& db, const std::string& statement) {
    return run_command("sqlite3 '" + db + "' \"" + statement + "\" 2>&1").output;
}

const char* kSweep = R"(
name = "leased"
[model]
preset = "tiny"
[hardware]
device = "cpu"
[space]
context = [64]
[trial]
steps = 2
warmup = 1
)";

}  // namespace

TEST_CASE("a schema version tune never wrote is refused before any statement runs", "[store][hostile]") {
    for (const char* version : {"-100000", "-5", "-1", "99", "2147483647"}) {
        test::ScratchDir dir;
        const std::string db = dir.file("r.db");
        build(db);
        run_sql(db, std::string("PRAGMA user_version = ") + version);
        const std::string before = run_sql(db, "SELECT count(*) FROM trials; SELECT count(*) FROM sweeps");
        for (const char* command : {"list", "best", "export --format csv"}) {
            auto out = run_tune(std::string(command) + " --db " + db);
            INFO(version << " " << command << ": " << out.output);
            CHECK(out.exit_code == 2);
            CHECK_THAT(out.output, Catch::Contains("schema version"));
        }
        CHECK_THROWS_AS(Store(db, Store::Mode::read_write), StoreError);
        CHECK(run_sql(db, "SELECT count(*) FROM trials; SELECT count(*) FROM sweeps") == before);
        CHECK(run_sql(db, "PRAGMA user_version") == std::string(version) + "\n");
    }
}

TEST_CASE("a database that is not tune's, or not a database, exits 2 and is left alone", "[store][hostile]") {
    test::ScratchDir dir;
    const std::string other = dir.file("other.db");
    run_sql(other, "CREATE TABLE notes (x TEXT); PRAGMA user_version = 3");
    auto out = run_tune("list --db " + other);
    CHECK(out.exit_code == 2);
    CHECK_THAT(out.output, Catch::Contains("not a tune database"));
    CHECK(run_sql(other, "PRAGMA journal_mode") == "delete\n");  // not switched to WAL: nothing ran

    const std::string text = dir.file("text.db");
    std::ofstream(text) << "this is not an SQLite file, just words to fill its header up to a page and more";
    for (const std::string& args : {"list --db " + text, "report --format text --db " + text}) {
        auto r = run_tune(args);
        INFO(args << ": " << r.output);
        CHECK(r.exit_code == 2);
        CHECK_THAT(r.output, Catch::Contains("error:") && !Catch::Contains("internal error"));
    }
}

TEST_CASE("a sweep whose database directory is missing exits 2, not 3", "[store][hostile]") {
    test::ScratchDir dir;
    std::ofstream(dir.file("s.toml")) << kSweep;
    auto out = run_tune("sweep --dry-run --no-report --db " + dir.file("missing/dir/r.db") + " " + dir.file("s.toml"));
    INFO(out.output);
    CHECK(out.exit_code == 2);
    CHECK_THAT(out.output, Catch::Contains("cannot open") && !Catch::Contains("internal error"));
}

TEST_CASE("readers work on a database in a directory nobody may write", "[store][hostile]") {
    test::ScratchDir dir;
    const fs::path place = fs::path(dir.file("ro"));
    fs::create_directories(place);
    const std::string db = (place / "r.db").string();
    build(db);
    // Leave the -wal and -shm files out, as a copied or archived database would.
    { Store(db, Store::Mode::read_write).check_integrity(); }
    for (const char* suffix : {"-wal", "-shm"}) fs::remove(db + suffix);
    // As root, permissions do not stop writes: make the directory immutable instead.
    if (run_command("chattr +i '" + place.string() + "' 2>/dev/null").exit_code != 0) {
        WARN("chattr +i is not available here: the read-only directory case is not exercised");
        return;
    }
    struct Unlock {
        std::string p;
        ~Unlock() { run_command("chattr -i '" + p + "'"); }
    } unlock{place.string()};
    for (const std::string& args :
         {"list --db " + db, "best --db " + db, "export --format json --db " + db, "report --format text --db " + db}) {
        auto out = run_tune(args);
        INFO(args << ": " << out.output);
        CHECK(out.exit_code != 3);
        CHECK_THAT(out.output, !Catch::Contains("readonly") && !Catch::Contains("unable to open"));
    }
    CHECK(run_tune("list --db " + db).exit_code == 0);
    CHECK(!fs::exists(db + "-shm"));
}

// A tmpfs of `size` mounted at `place` for the test's life; mounted() is false where this
// process may not mount (not root), and the test then says so and returns.
class SmallDisk {
public:
    SmallDisk(const fs::path& place, const char* size) : place_(place) {
        fs::create_directories(place);
        mounted_ = ::mount("tmpfs", place.c_str(), "tmpfs", 0, fmt::format("size={}", size).c_str()) == 0;
    }
    ~SmallDisk() {
        if (mounted_) ::umount2(place_.c_str(), MNT_DETACH);
    }
    SmallDisk(const SmallDisk&) = delete;
    SmallDisk& operator=(const SmallDisk&) = delete;
    bool mounted() const { return mounted_; }

private:
    fs::path place_;
    bool mounted_ = false;
};

TEST_CASE("a full disk is reported with the path and the free space, and the log is truncated", "[store][hostile]") {
    test::ScratchDir dir;
    const fs::path place = fs::path(dir.file("small"));
    const SmallDisk disk(place, "256k");
    if (!disk.mounted()) {
        WARN("cannot mount a small tmpfs here (needs root): the disk-full case is not exercised");
        return;
    }
    std::ofstream(dir.file("s.toml")) << kSweep;
    const std::string db = (place / "r.db").string();
    // Fill the disk but for a few pages, then ask for a sweep's worth of writes.
    run_command("dd if=/dev/zero of='" + (place / "filler").string() + "' bs=4k count=62 2>/dev/null");
    auto out = run_tune("sweep --dry-run --no-report --db " + db + " " + dir.file("s.toml"));
    INFO(out.output);
    CHECK(out.exit_code == 2);
    CHECK_THAT(out.output, Catch::Contains("full") && Catch::Contains("free") && Catch::Contains(place.string()));
    CHECK((!fs::exists(db + "-wal") || fs::file_size(db + "-wal") == 0));
}

TEST_CASE("a trial whose result the full disk refused runs again on resume, its attempt not counted",
          "[store][hostile]") {
    test::ScratchDir dir;
    const fs::path place = fs::path(dir.file("small"));
    const SmallDisk disk(place, "1m");
    if (!disk.mounted()) {
        WARN("cannot mount a small tmpfs here (needs root): the disk-full case is not exercised");
        return;
    }
    // Many steps: the result's rows need more pages than the log kept from earlier writes.
    std::ofstream(dir.file("s.toml")) << std::string(kSweep).replace(std::string(kSweep).find("steps = 2"), 9,
                                                                     "steps = 4000");
    const std::string db = (place / "r.db").string();
    const std::string filler = (place / "filler").string();
    const std::string sweep =
        fmt::format("{} sweep --no-probe --no-report --db {} {} 2>&1", TUNE_BINARY, db, dir.file("s.toml"));
    const std::string fake = fmt::format("TUNE_TRIAL_PROGRAM={}/tests/support/fake_trial.py ", TUNE_SOURCE_DIR);
    // More failed runs than a trial has attempts: each trial fills the disk, so its result cannot
    // be written, and the user frees the space and resumes.
    for (int run = 0; run <= 3; ++run) {
        const auto out = run_command(fake + "FAKE_TRIAL_FILL=" + filler + " " + sweep);
        INFO(out.output);
        CHECK(out.exit_code == 2);
        CHECK_THAT(out.output, Catch::Contains("full"));
        fs::remove(filler);
        CHECK(run_sql(db, "SELECT group_concat(status || ':' || attempts) FROM trials") == "pending:0\n");
    }
    const auto out = run_command(fake + sweep);
    INFO(out.output);
    CHECK(out.exit_code == 0);
    CHECK(run_sql(db, "SELECT group_concat(status || ':' || attempts) FROM trials") == "ok:1\n");
}

TEST_CASE("a second driver of the same sweep refuses while the first is alive, and takes over a dead one's lease",
          "[store][hostile][lease]") {
    test::ScratchDir dir;
    std::ofstream(dir.file("s.toml")) << kSweep;
    const std::string db = dir.file("r.db");
    REQUIRE(run_tune("sweep --dry-run --no-report --db " + db + " " + dir.file("s.toml")).exit_code == 0);

    // This test process stands for a live driver on this host.
    const SweepLease alive{host_name(), static_cast<std::int64_t>(::getpid()), {}};
    {
        Store store(db, Store::Mode::read_write);
        REQUIRE(!store.take_lease("leased", alive, [](const SweepLease&) { return true; }));
    }
    auto refused = run_tune("sweep --dry-run --no-report --db " + db + " " + dir.file("s.toml"));
    INFO(refused.output);
    CHECK(refused.exit_code == 2);
    CHECK_THAT(refused.output,
               Catch::Contains("being run by another driver") && Catch::Contains("pid " + std::to_string(::getpid())));

    // A process that no longer exists: its lease is taken over.
    const pid_t child = ::fork();
    if (child == 0) _exit(0);
    ::waitpid(child, nullptr, 0);
    {
        Store store(db, Store::Mode::read_write);
        store.drop_lease("leased", alive);
        REQUIRE(!store.take_lease("leased", {host_name(), child, {}}, [](const SweepLease&) { return true; }));
    }
    auto taken = run_tune("sweep --dry-run --no-report --db " + db + " " + dir.file("s.toml"));
    INFO(taken.output);
    CHECK(taken.exit_code == 0);
    // The driver gave its lease back when it finished.
    CHECK(run_sql(db, "SELECT count(*) FROM sweep_leases") == "0\n");
}

TEST_CASE("a lease from another host is honoured while its heartbeat is fresh", "[store][lease]") {
    test::ScratchDir dir;
    Store store(dir.file("r.db"), Store::Mode::read_write);
    const SweepLease far{"elsewhere", 12345, {}};
    REQUIRE(!store.take_lease("s", far, [](const SweepLease&) { return false; }));
    const SweepLease me{"here", 1, {}};
    auto held =
        store.take_lease("s", me, [](const SweepLease& l) { return now_timestamp() - l.heartbeat > kLeaseStaleAfter; });
    REQUIRE(held);
    CHECK(held->host == "elsewhere");
    CHECK(held->pid == 12345);
    CHECK(store.renew_lease("s", far));
    CHECK(!store.renew_lease("s", me));
    CHECK(!store.take_lease("s", me, [](const SweepLease&) { return true; }));  // stale: taken over
    CHECK(!store.renew_lease("s", far));
}

TEST_CASE(
    "framework predictions and a sweep's framework round-trip, re-estimates replace them, and a damaged column "
    "reads as none",
    "[store][frameworks]") {
    test::ScratchDir dir;
    const std::string path = dir.file("fw.db");
    FrameworkPredictions p;
    p["hf-trainer"] = {10, 20, 30, 0, 1.5, 2000.0, true, ""};
    p["deepspeed"].invalid = "LOMO under DeepSpeed (ZeRO-2)";
    SweepRecord record = test::sample_sweep("fw");
    record.framework = "hf-trainer";
    TrialId id = 0;
    {
        Store db(path, Store::Mode::read_write);
        const SweepId sweep = db.open_sweep(record, false).id;
        NewTrial t{test::sample_config(0), TrialStatus::pending, "", test::sample_estimate(0), 0, p};
        db.add_trials(sweep, std::vector<NewTrial>{t});
        const auto stored = db.trials({sweep, std::nullopt, false, false});
        REQUIRE(stored.size() == 1);
        CHECK(stored[0].frameworks == p);
        CHECK(stored[0].sweep_framework == "hf-trainer");
        CHECK(db.find_sweep("fw")->record.framework == "hf-trainer");
        id = stored[0].id;
        // A re-estimate after calibration carries new predictions.
        FrameworkPredictions q = p;
        q["hf-trainer"].device = 31;
        db.update_pending(std::vector<PendingUpdate>{{id, test::sample_estimate(0), 0, TrialStatus::pending, "", q}});
        CHECK(db.trial(id)->frameworks.at("hf-trainer").device == 31);
    }
    // Text that is not a predictions object answers as if there were none, never an internal error.
    for (const char* damaged : {"'{not json'", "'[1,2]'", "'{\"hf-trainer\": {\"device\": \"x\"}}'"}) {
        INFO(damaged);
        run_sql(path, fmt::format("UPDATE trials SET est_frameworks_json = {} WHERE id = {}", damaged, id));
        const Store db(path, Store::Mode::read_only);
        CHECK(db.trial(id)->frameworks.empty());
    }
}

TEST_CASE(
    "a damaged or impossible trial row is refused by every reader with exit 2, naming the database, the trial "
    "and the column",
    "[store][hostile]") {
    struct Damage {
        const char* set;     // the SQL assignment that damages trial 1
        const char* column;  // what the message must name
        const char* what;
    };
    const Damage cases[] = {
        {"config_json = '{not json'", "config_json", "is not JSON"},
        {"config_json = json_object('optimizer', 5)", "config_json", "is not a configuration"},
        {"config_json = json_set(config_json, '$.model.layers', -3)", "config_json", "holds a model tune refuses"},
        {"config_json = json_set(config_json, '$.world_size', 0)", "config_json", "out of range"},
        {"rank_peaks_json = json_quote('x')", "rank_peaks_json", "is not a list of byte counts"},
        {"rank_real_json = json_object('real_peaks', 1), real_peak = 1, baseline = 0, untracked = 0", "rank_real_json",
         "is not the ranks' memory"},
        {"tokens_per_s = 1e999", "tokens_per_s", "holds inf"},
        {"peak_bytes = -1", "peak_bytes", "holds -1"},
        {"est_tokens_per_s = -5", "est_tokens_per_s", "holds -5"},
    };
    for (const Damage& d : cases) {
        test::ScratchDir dir;
        const std::string db = dir.file("r.db");
        build(db);
        run_sql(db, std::string("UPDATE trials SET ") + d.set + " WHERE id = 1");
        for (const char* command : {"list", "best", "status", "report --format text", "export --format json"}) {
            INFO(d.set << " | tune " << command);
            const auto out = run_tune(std::string(command) + " --db " + db);
            CHECK(out.exit_code == 2);
            CHECK_THAT(out.output, Catch::Contains(db) && Catch::Contains("trial 1: column " + std::string(d.column)) &&
                                       Catch::Contains(d.what) && !Catch::Contains("internal error"));
        }
    }
}

namespace {

// A database a real sweep wrote: two measured trials of the tiny model on the CPU, with their
// per-rank memory (rank_peaks_json, rank_real_json) and the sweep's plan (plan_json).
std::string measured_database(const test::ScratchDir& dir) {
    std::ofstream(dir.file("m.toml")) << test::tiny_cpu_sweep(
        "m", "[space]\ncontext = [64]\nmicro_batch = [1, 2]\n[trial]\nsteps = 2\nwarmup = 1\n");
    const std::string db = dir.file("base.db");
    const auto out = run_tune("sweep --no-report --db " + db + " " + dir.file("m.toml"));
    INFO(out.output);
    REQUIRE(out.exit_code == 0);
    { Store(db, Store::Mode::read_write).check_integrity(); }  // the last connection folds the log in
    return db;
}

// A copy of `base` at `copy` whose `column` of `table` (trial 1 of trials, or every sweep) holds
// `value`, written through SQLite's own API with the value bound.
void damaged_copy(const std::string& base, const std::string& copy, const char* table, const char* column,
                  const std::string& value) {
    fs::copy_file(base, copy, fs::copy_options::overwrite_existing);
    sqlite3* h = nullptr;
    REQUIRE(sqlite3_open(copy.c_str(), &h) == SQLITE_OK);
    const std::string sql =
        fmt::format("UPDATE {} SET {} = ?1{}", table, column, std::string(table) == "trials" ? " WHERE id = 1" : "");
    sqlite3_stmt* st = nullptr;
    REQUIRE(sqlite3_prepare_v2(h, sql.c_str(), -1, &st, nullptr) == SQLITE_OK);
    sqlite3_bind_text(st, 1, value.c_str(), -1, SQLITE_TRANSIENT);
    CHECK(sqlite3_step(st) == SQLITE_DONE);
    CHECK(sqlite3_changes(h) >= 1);
    sqlite3_finalize(st);
    sqlite3_close(h);
}

// Every command that reads trials back from a database.
const char* const kReaders[] = {"list",
                                "best",
                                "report --format text",
                                "export --format csv",
                                "export --format json",
                                "status",
                                "export --trial 1 --emit deepspeed"};

}  // namespace

TEST_CASE(
    "JSON columns of a real database that are not JSON or hold the wrong types are refused by every reader with "
    "exit 2, naming the file, the trial and the column",
    "[store][hostile]") {
    struct Damage {
        const char* column;
        std::string value;
        const char* what;
    };
    const Damage cases[] = {
        {"config_json", "{not json", "is not JSON"},
        {"config_json", R"({"optimizer": 5})", "is not a configuration"},
        {"rank_peaks_json", "[1, 2", "is not JSON"},
        {"rank_peaks_json", "[1, -2]", "is not a list of byte counts"},
        {"rank_peaks_json", "[1.5]", "is not a list of byte counts"},
        {"rank_real_json", "{not json", "is not JSON"},
        {"rank_real_json", "[1]", R"(is not the ranks' memory (no "real_peaks"))"},
        {"rank_real_json", R"({"real_peaks": [-1], "baselines": [1], "untracked": [0]})",
         "is not the ranks' memory (real_peaks is not a list of byte counts)"},
        {"rank_real_json", R"({"real_peaks": [1], "baselines": [2.5], "untracked": [0]})",
         "is not the ranks' memory (baselines is not a list of byte counts)"},
        {"rank_real_json", R"({"real_peaks": [1], "baselines": [1], "untracked": ["x"]})",
         "is not the ranks' memory (untracked is not a list of integers)"},
    };
    test::ScratchDir dir;
    const std::string base = measured_database(dir);
    const std::string db = dir.file("d.db");
    for (const Damage& d : cases) {
        damaged_copy(base, db, "trials", d.column, d.value);
        for (const char* command : kReaders) {
            INFO(d.column << " = " << d.value << " | tune " << command);
            const auto out = run_tune(std::string(command) + " --db " + db);
            INFO(out.output);
            CHECK(out.exit_code == 2);
            CHECK_THAT(out.output, Catch::Contains(db) && Catch::Contains("trial 1: column " + std::string(d.column)) &&
                                       Catch::Contains(d.what) && !Catch::Contains("internal error"));
        }
    }
}

TEST_CASE(
    "a sweep's plan_json that is not JSON or holds the wrong types leaves out only the predicted makespan, with a "
    "warning naming the file, the sweep and the column",
    "[store][hostile]") {
    struct Damage {
        std::string value;
        const char* what;
    };
    const Damage cases[] = {
        {"{not json", "is not JSON"},
        {"[1]", "holds array, not an object"},
        {R"({"makespan": 5})", R"(holds number as "makespan", not an object)"},
        {R"({"makespan": {"predicted_s": "x", "slots": 1}})",
         R"(holds "x" as "makespan"."predicted_s", not a finite, non-negative number)"},
        {R"({"makespan": {"predicted_s": 1, "slots": [2]}})", R"(holds [2] as "makespan"."slots")"},
        {R"({"makespan": {"predicted_s": -1, "slots": 1}})", R"(holds -1 as "makespan"."predicted_s")"},
    };
    test::ScratchDir dir;
    const std::string base = measured_database(dir);
    const std::string db = dir.file("d.db");
    const std::string html = dir.file("r.html");
    for (const Damage& d : cases) {
        damaged_copy(base, db, "sweeps", "plan_json", d.value);
        const std::string warning = "warning: " + db + ": sweep \"m\" (id 1): column plan_json " + d.what;
        for (const std::string& command : {std::string("report --format text"), "report -o " + html}) {
            INFO("plan_json = " << d.value << " | tune " << command);
            const auto out = run_tune(command + " --db " + db);
            INFO(out.output);
            CHECK(out.exit_code == 0);
            CHECK_THAT(out.output, Catch::Contains(warning) && !Catch::Contains("internal error"));
        }
        CHECK_THAT(run_tune("report --format text --db " + db).output, Catch::Contains("makespan -\n"));
        // The readers that do not read the plan answer as before.
        for (const char* command : kReaders) {
            INFO("plan_json = " << d.value << " | tune " << command);
            CHECK(run_tune(std::string(command) + " --db " + db).exit_code == 0);
        }
    }
    // The plan tune wrote reads back whole, without a warning.
    const auto intact = run_tune("report --format text --db " + base);
    CHECK(intact.exit_code == 0);
    CHECK_THAT(intact.output, Catch::Contains("makespan predicted") && !Catch::Contains("warning"));
}

TEST_CASE(
    "a lease whose heartbeat lies in the future or overflows is suspect, not fresh, and is taken over with a "
    "warning",
    "[store][hostile][lease]") {
    const Timestamp now = now_timestamp();
    const auto at = [&](std::int64_t ms) { return Timestamp{std::chrono::milliseconds{ms}}; };
    const std::int64_t now_ms = now.time_since_epoch().count();
    const std::string other = "another-host";
    CHECK_FALSE(lease_lapse({other, 1, at(now_ms - 5000)}, host_name(), now));
    CHECK_FALSE(lease_lapse({other, 1, at(now_ms + 5000)}, host_name(), now));  // a little skew is tolerated
    CHECK_THAT(lease_lapse({other, 1, at(now_ms - 600000)}, host_name(), now).value_or(""),
               Catch::Contains("600 s old"));
    CHECK_THAT(lease_lapse({other, 1, at(now_ms + 3600000)}, host_name(), now).value_or(""),
               Catch::Contains("3600 s in the future"));
    CHECK(lease_lapse({other, 1, at(std::numeric_limits<std::int64_t>::min())}, host_name(), now));
    CHECK(lease_lapse({other, 1, at(std::numeric_limits<std::int64_t>::max())}, host_name(), now));

    test::ScratchDir dir;
    std::ofstream(dir.file("s.toml")) << kSweep;
    const std::string db = dir.file("r.db");
    REQUIRE(run_tune("sweep --dry-run --no-report --db " + db + " " + dir.file("s.toml")).exit_code == 0);
    for (const char* beat : {"9223372036854775807", "-9223372036854775808"}) {
        {
            Store store(db, Store::Mode::read_write);
            REQUIRE(!store.take_lease("leased", {other, 4242, {}}, [](const SweepLease&) { return true; }));
        }
        run_sql(db, std::string("UPDATE sweep_leases SET heartbeat_ms = ") + beat);
        const auto taken = run_tune("sweep --dry-run --no-report --restart --db " + db + " " + dir.file("s.toml"));
        INFO(beat << ": " << taken.output);
        CHECK(taken.exit_code == 0);
        if (std::string(beat)[0] != '-')
            CHECK_THAT(taken.output, Catch::Contains("warning") && Catch::Contains("in the future"));
    }
}

TEST_CASE("status says a running trial's driver is gone, and since when", "[store][hostile][lease]") {
    test::ScratchDir dir;
    const std::string db = dir.file("r.db");
    build(db);
    // Trial 1 was claimed by a driver on another host whose heartbeat stopped ten minutes ago.
    {
        Store store(db, Store::Mode::read_write);
        const SweepId sweep = store.find_sweep("hostile")->id;
        REQUIRE(store.claim_next_pending(sweep));
        REQUIRE(!store.take_lease("hostile", {"gone-host", 777, {}}, [](const SweepLease&) { return true; }));
    }
    run_sql(db, "UPDATE sweep_leases SET heartbeat_ms = heartbeat_ms - 600000");
    const auto gone = run_tune("status --db " + db);
    INFO(gone.output);
    CHECK(gone.exit_code == 0);
    CHECK_THAT(gone.output, Catch::Contains("running: trial") &&
                                Catch::Contains("driver: gone (pid 777 on host gone-host: its last heartbeat is 6") &&
                                Catch::Contains("run again when the sweep resumes"));
    // No lease at all: the driver ended and left the trial running.
    run_sql(db, "DELETE FROM sweep_leases");
    CHECK_THAT(run_tune("status --db " + db).output, Catch::Contains("driver: none holds the sweep"));
    // A fresh heartbeat: the driver is named as alive.
    {
        Store store(db, Store::Mode::read_write);
        REQUIRE(!store.take_lease("hostile", {"live-host", 778, {}}, [](const SweepLease&) { return true; }));
    }
    CHECK_THAT(run_tune("status --db " + db).output, Catch::Contains("driver: pid 778 on host live-host, heartbeat"));
}

TEST_CASE("a pending trial whose stored configuration was edited is refused at claim, never run as edited",
          "[store][hostile]") {
    test::ScratchDir dir;
    std::ofstream(dir.file("s.toml")) << kSweep;
    const std::string db = dir.file("r.db");
    REQUIRE(run_tune("sweep --dry-run --no-report --db " + db + " " + dir.file("s.toml")).exit_code == 0);
    const std::string pending = run_sql(db, "SELECT count(*) FROM trials WHERE status = 'pending'");
    REQUIRE(pending != "0\n");
    run_sql(db,
            "UPDATE trials SET config_json = json_set(config_json, '$.lr', 0.5, '$.steps', 7) "
            "WHERE status = 'pending'");
    const auto out = run_tune("sweep --no-report --db " + db + " " + dir.file("s.toml"));
    INFO(out.output);
    CHECK(out.exit_code == 2);
    CHECK_THAT(out.output, Catch::Contains(db) && Catch::Contains("does not match its config_hash"));
    // The claim was rolled back: nothing ran, nothing lost an attempt.
    CHECK(run_sql(db, "SELECT count(*) FROM trials WHERE status = 'pending'") == pending);
    CHECK(run_sql(db, "SELECT max(attempts) FROM trials") == "0\n");
}

TEST_CASE("status escapes a sweep name from the database before the terminal sees it", "[store][hostile]") {
    test::ScratchDir dir;
    const std::string db = dir.file("r.db");
    {
        Store store(db, Store::Mode::read_write);
        const SweepId sweep = store.open_sweep(test::sample_sweep("red\x1b[31mname"), false).id;
        test::add_pending(store, sweep, 0, 1);
    }
    const auto out = run_tune("status --db " + db);
    CHECK(out.exit_code == 0);
    CHECK(out.output.find('\x1b') == std::string::npos);
    CHECK_THAT(out.output, Catch::Contains("red\\x1b[31mname"));
}

TEST_CASE("a write-ahead log left by a driver that died is folded into the database when the store opens",
          "[store][hostile]") {
    test::ScratchDir dir;
    const std::string db = dir.file("r.db");
    build(db);
    const auto bytes = [](const std::string& path) {
        std::error_code ec;
        const auto n = std::filesystem::file_size(path, ec);
        return ec ? std::uintmax_t{0} : n;
    };
    // A child writes 200 trials and dies without closing its connection: the rows stay in the log
    // (below the ~32 MiB at which SQLite would fold it).
    const pid_t child = ::fork();
    if (child == 0) {
        Store store(db, Store::Mode::read_write);
        test::add_pending(store, store.find_sweep("hostile")->id, 100, 200);
        ::_exit(0);
    }
    int status = 0;
    ::waitpid(child, &status, 0);
    REQUIRE(WIFEXITED(status));
    const auto main_before = bytes(db);
    REQUIRE(bytes(db + "-wal") > main_before);
    Store store(db, Store::Mode::read_write);
    // Checked while the store is open: closing the last connection folds the log anyway.
    CHECK(bytes(db) > main_before);  // the rows reached the database itself
    CHECK(store.trials({std::nullopt, std::nullopt, false, false}).size() == 202);
}
