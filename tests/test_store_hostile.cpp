// The results database under hostile or unlucky conditions: schema versions
// tune never wrote, foreign files, read-only places, a full disk, two drivers.
// Each of these is the user's to fix, so each exits 2 with a message.
#include <catch2/catch.hpp>

#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "driver/lease.h"
#include "store/store.h"
#include "tests/support/run_command.h"
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

std::string host_name() {
    char name[256] = {};
    return ::gethostname(name, sizeof(name) - 1) == 0 ? std::string(name) : std::string("unknown");
}

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
    for (const std::string& args : {"list --db " + db, "best --db " + db, "export --format json --db " + db,
                                    "report --format text --db " + db}) {
        auto out = run_tune(args);
        INFO(args << ": " << out.output);
        CHECK(out.exit_code != 3);
        CHECK_THAT(out.output, !Catch::Contains("readonly") && !Catch::Contains("unable to open"));
    }
    CHECK(run_tune("list --db " + db).exit_code == 0);
    CHECK(!fs::exists(db + "-shm"));
}

TEST_CASE("a full disk is reported with the path and the free space, and the log is truncated", "[store][hostile]") {
    test::ScratchDir dir;
    const fs::path place = fs::path(dir.file("small"));
    fs::create_directories(place);
    if (::mount("tmpfs", place.c_str(), "tmpfs", 0, "size=256k") != 0) {
        WARN("cannot mount a small tmpfs here (needs root): the disk-full case is not exercised");
        return;
    }
    struct Unmount {
        std::string p;
        ~Unmount() { ::umount2(p.c_str(), MNT_DETACH); }
    } unmount{place.string()};
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
    CHECK_THAT(refused.output, Catch::Contains("being run by another driver") &&
                                   Catch::Contains("pid " + std::to_string(::getpid())));

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
    auto held = store.take_lease("s", me, [](const SweepLease& l) { return now_timestamp() - l.heartbeat > kLeaseStaleAfter; });
    REQUIRE(held);
    CHECK(held->host == "elsewhere");
    CHECK(held->pid == 12345);
    CHECK(store.renew_lease("s", far));
    CHECK(!store.renew_lease("s", me));
    CHECK(!store.take_lease("s", me, [](const SweepLease&) { return true; }));  // stale: taken over
    CHECK(!store.renew_lease("s", far));
}
