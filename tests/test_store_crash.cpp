// The store under process death and concurrency: a writer killed with SIGKILL
// at random points leaves a sound database with no half-recorded trial, and
// readers answer while another process writes.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <random>
#include <thread>

#include <nlohmann/json.hpp>

#include "store/best.h"
#include "store/store.h"
#include "tests/support/run_command.h"
#include "tests/test_store_support.h"

using namespace tune;
using tune::test::sample_config;
using tune::test::sample_result;
using tune::test::sample_sweep;

namespace {

constexpr auto kRw = Store::Mode::read_write;
constexpr int kSeedBase = 1000;  // sample_config(i).seed == kSeedBase + i
constexpr int kInitialTrials = 2000;
constexpr int kBatch = 25;

int index_of(const TrialConfig& c) { return static_cast<int>(c.seed) - kSeedBase; }

// The child's work: enumerate a batch, then claim and record until killed or out of trials.
[[noreturn]] void writer_child(const std::string& path, int batch_first) {
    int code = 0;
    try {
        Store db(path, kRw);
        const SweepId sweep = db.open_sweep(sample_sweep("crash"), false).id;
        test::add_pending(db, sweep, batch_first, kBatch);
        while (auto claimed = db.claim_next_pending(sweep)) {
            TrialResult r = sample_result(claimed->config, index_of(claimed->config));
            r.tokens_per_s += static_cast<double>(claimed->id);
            db.record_result(claimed->id, r, "stderr tail", now_timestamp(), now_timestamp());
            if (batch_first < 0) test::add_pending(db, sweep, 100000 + static_cast<int>(claimed->id) * kBatch, 1);
        }
    } catch (...) {
        code = 3;
    }
    ::_exit(code);
}

// Every trial is either completely recorded or has no measurement at all.
void check_consistent(const std::string& path, std::size_t& ok_count) {
    Store db(path, kRw);
    REQUIRE(db.check_integrity() == "ok");
    const auto trials = db.trials({std::nullopt, std::nullopt, true, true});
    REQUIRE((trials.size() - kInitialTrials) % kBatch == 0);  // enumeration batches are atomic
    ok_count = 0;
    for (const auto& t : trials) {
        switch (t.result.status) {
            case TrialStatus::ok: {
                TrialResult expected = sample_result(t.result.config, index_of(t.result.config));
                expected.tokens_per_s += static_cast<double>(t.id);
                REQUIRE(t.measured);
                REQUIRE(t.result == expected);  // memory rows, step rows, every column
                REQUIRE(t.stderr_tail == "stderr tail");
                ++ok_count;
                break;
            }
            case TrialStatus::pending:
            case TrialStatus::running:
                REQUIRE_FALSE(t.measured);
                REQUIRE(t.result.step_ms.empty());
                break;
            case TrialStatus::failed:  // given up after kMaxAttempts deaths while running
                REQUIRE_FALSE(t.measured);
                REQUIRE_THAT(t.result.reason, Catch::Contains("abandoned"));
                break;
            default:
                FAIL("unexpected status " << to_string(t.result.status));
        }
    }
}

void prepare(const std::string& path, int ok_trials) {
    Store db(path, kRw);
    const SweepId sweep = db.open_sweep(sample_sweep("crash"), false).id;
    test::add_pending(db, sweep, 0, kInitialTrials);
    for (int i = 0; i < ok_trials; ++i) {
        auto claimed = db.claim_next_pending(sweep);
        TrialResult r = sample_result(claimed->config, index_of(claimed->config));
        r.tokens_per_s += static_cast<double>(claimed->id);
        db.record_result(claimed->id, r, "stderr tail", now_timestamp(), now_timestamp());
    }
}

}  // namespace

TEST_CASE("a writer killed at random points never leaves a half-recorded trial", "[store][crash]") {
    test::ScratchDir dir;
    const std::string path = dir.file("crash.db");
    prepare(path, 0);
    std::mt19937 rng(20261122);
    std::uniform_int_distribution<int> delay_us(0, 30000);
    std::size_t ok_count = 0;
    // At least 30 kills, and more on a loaded machine until the writer has made
    // real progress between them (a slow writer would otherwise test nothing).
    constexpr int kKills = 30;
    constexpr int kMaxKills = 300;
    for (int round = 0; round < kMaxKills && (round < kKills || ok_count <= 100); ++round) {
        const pid_t pid = ::fork();
        REQUIRE(pid >= 0);
        if (pid == 0) writer_child(path, kInitialTrials + round * kBatch);
        std::this_thread::sleep_for(std::chrono::microseconds(delay_us(rng)));
        ::kill(pid, SIGKILL);
        int status = 0;
        ::waitpid(pid, &status, 0);
        INFO("round " << round);
        check_consistent(path, ok_count);
    }
    CHECK(ok_count > 100);
}

TEST_CASE("readers answer `best` while another process writes", "[store][crash]") {
    test::ScratchDir dir;
    const std::string path = dir.file("busy.db");
    prepare(path, 5);
    const pid_t writer = ::fork();
    REQUIRE(writer >= 0);
    if (writer == 0) writer_child(path, -kBatch);  // keeps enumerating one more per record: never runs out

    std::uint64_t last_ok = 0;
    for (int i = 0; i < 5; ++i) {
        auto out = test::run_command(std::string(TUNE_BINARY) + " best --db " + path + " --json");
        INFO(out.output);
        REQUIRE(out.exit_code == 0);
        auto j = nlohmann::json::parse(out.output);
        REQUIRE(j["best"].is_object());
        const Store reader = Store::open_reader(path);
        auto answer = find_best(reader, {});
        REQUIRE_FALSE(answer.ranked.empty());
        last_ok = std::max<std::uint64_t>(last_ok, answer.measured_ok);
        REQUIRE(test::run_command(std::string(TUNE_BINARY) + " list --db " + path).exit_code == 0);
    }
    int status = 0;
    const bool writer_still_running = ::waitpid(writer, &status, WNOHANG) == 0;
    ::kill(writer, SIGKILL);
    ::waitpid(writer, &status, 0);
    CHECK(writer_still_running);
    CHECK(last_ok > 5);  // the readers saw the writer's progress
    Store db(path, kRw);
    CHECK(db.check_integrity() == "ok");
}
