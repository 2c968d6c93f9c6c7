// `tune sweep` as users run it, with real trials of the tiny model on the CPU
// backend: statuses add up, the recorded front is the true front, pruning
// never drops what would have fit, faults injected into `tune trial` are
// recorded with the right status, and a driver killed at random points resumes
// with every trial recorded exactly once.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/pareto.h"
#include "support/run_command.h"
#include "tests/support/spawn.h"

using tune::test::run_command;
using tune::test::run_tune;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

fs::path scratch(const std::string& name) {
    const fs::path dir = fs::temp_directory_path() / "tune-e2e" / name;
    fs::remove_all(dir);
    fs::create_directories(dir);
    return dir;
}

// A sweep file in `dir` with the given [hardware] memory limit and margin.
fs::path write_sweep(const fs::path& dir, const std::string& name, const std::string& limit, const std::string& space,
                     const std::string& extra = "") {
    const fs::path file = dir / (name + ".toml");
    std::ofstream(file) << "name = \"" << name << "\"\n[model]\npreset = \"tiny\"\n[hardware]\ndevice = \"cpu\"\n"
                        << "memory_limit = \"" << limit << "\"\nmargin = 0.0\n[space]\n"
                        << space << "\n[trial]\nsteps = 2\nwarmup = 1\ntimeout = \"120s\"\n"
                        << extra << "\n[output]\ndatabase = \"" << (dir / (name + ".db")).string() << "\"\nreport = \""
                        << (dir / (name + ".html")).string() << "\"\n";
    return file;
}

json export_trials(const fs::path& db) {
    auto r = run_tune("export --db " + db.string() + " --format json");
    REQUIRE(r.exit_code == 0);
    return json::parse(r.output);
}

std::string key(const json& trial) {
    const json& c = trial.contains("config") ? trial["config"] : trial;
    return c["optimizer"].get<std::string>() + c["precision"].get<std::string>() +
           std::to_string(c["context"].get<int>()) + c["checkpointing"].get<std::string>();
}

const char* kSpace = R"(optimizer = ["adamw", "lomo"]
precision = ["fp32", "bf16-mixed"]
checkpointing = ["none", "full"]
context = [64, 256]
micro_batch = [4])";

}  // namespace

TEST_CASE("a real sweep: statuses add up, the front is true, pruning drops only what does not fit", "[e2e]") {
    const fs::path dir = scratch("real");
    // Unlimited: every configuration measured.
    const fs::path all = write_sweep(dir, "all", "1GiB", kSpace);
    REQUIRE(run_tune("sweep " + all.string() + " --no-probe --no-report").exit_code == 0);
    std::map<std::string, std::uint64_t> measured_peak;
    const json all_trials = export_trials(dir / "all.db")["trials"];
    for (const json& t : all_trials) {
        REQUIRE(t["status"] == "ok");
        // What the CPU limit applies to: the tagged bytes, not the process's baseline (`overhead`).
        measured_peak[key(t)] =
            t["measured"]["peak_bytes"].get<std::uint64_t>() - t["measured"]["memory"]["overhead"].get<std::uint64_t>();
    }
    REQUIRE(measured_peak.size() == 16);

    // Limited to the median measured peak: some prune, some run, borderline ones may OOM.
    std::vector<std::uint64_t> peaks;
    for (auto& [k, p] : measured_peak) peaks.push_back(p);
    std::sort(peaks.begin(), peaks.end());
    const std::uint64_t limit = peaks[peaks.size() / 2];
    const fs::path tight = write_sweep(dir, "tight", std::to_string(limit) + "B", kSpace);
    auto run = run_tune("sweep " + tight.string() + " --no-probe");
    INFO(run.output);
    REQUIRE(run.exit_code == 0);
    CHECK_THAT(run.output, Catch::Contains("Pareto front"));
    CHECK_THAT(run.output, Catch::Contains("Calibration from") && Catch::Contains("to the power"));
    CHECK(fs::exists(dir / "tight.html"));

    const json trials = export_trials(dir / "tight.db")["trials"];
    std::map<std::string, int> status_count;
    std::vector<tune::ParetoPoint> ok_points;
    std::vector<std::string> ok_keys;
    for (const json& t : trials) {
        const std::string status = t["status"];
        ++status_count[status];
        if (status == "pruned") CHECK(measured_peak.at(key(t)) > limit);  // never drops what fits
        if (status == "ok") {
            CHECK(measured_peak.at(key(t)) <= limit);
            ok_points.push_back({double(t["measured"]["peak_bytes"].get<std::uint64_t>()),
                                 t["measured"]["tokens_per_s"].get<double>()});
            ok_keys.push_back(key(t));
        }
        if (status == "oom") CHECK(measured_peak.at(key(t)) > limit);
    }
    CHECK(trials.size() == 16);
    CHECK(status_count["ok"] + status_count["oom"] + status_count["pruned"] == 16);
    CHECK(status_count["pruned"] > 0);
    CHECK(status_count["ok"] > 0);

    // The database's Pareto view equals a brute-force front of the recorded ok rows.
    std::set<std::string> expected;
    for (std::size_t i : tune::pareto_front(ok_points)) expected.insert(ok_keys[i]);
    auto view = run_command("sqlite3 " + (dir / "tight.db").string() +
                            " \"SELECT optimizer || precision || context || checkpointing FROM pareto_front\"");
    std::set<std::string> front;
    std::istringstream lines(view.output);
    for (std::string line; std::getline(lines, line);) front.insert(line);
    CHECK(front == expected);
    CHECK_FALSE(expected.empty());
}

TEST_CASE("faults injected into tune trial are recorded with the right status", "[e2e]") {
    const fs::path dir = scratch("faults");
    const std::map<std::string, std::string> expected{
        {"crash", "failed"}, {"hang", "timeout"}, {"nan", "failed"}, {"oom", "oom"}};
    for (const auto& [fault, status] : expected) {
        INFO(fault);
        const fs::path sweep = write_sweep(dir, "fault-" + fault, "1GiB", "optimizer = \"adamw\"\ncontext = 64", "");
        std::string text;
        {
            std::ifstream in(sweep);
            text.assign(std::istreambuf_iterator<char>(in), {});
        }
        // Only the hang should meet the timeout, so only its sweep gets a short one.
        if (fault == "hang") text.replace(text.find("timeout = \"120s\""), 16, "timeout = \"3s\"");
        std::ofstream(sweep) << text;
        auto r = run_command("TUNE_TRIAL_FAULT=" + fault + " " + std::string(TUNE_BINARY) + " sweep " + sweep.string() +
                             " --no-probe --no-report 2>&1");
        CHECK(r.exit_code == 0);  // the sweep survives its trial
        const json trials = export_trials(dir / ("fault-" + fault + ".db"))["trials"];
        REQUIRE(trials.size() == 1);
        CHECK(trials[0]["status"] == status);
    }
}

TEST_CASE("a driver killed with SIGKILL at random points resumes, every trial is recorded exactly once", "[e2e]") {
    const fs::path dir = scratch("kill");
    const fs::path sweep = write_sweep(dir, "killed", "1GiB",
                                       "optimizer = [\"adamw\", \"lion\", \"adafactor\", \"adam8bit\"]\n"
                                       "precision = [\"fp32\", \"bf16-mixed\"]\ncontext = [64, 128, 256]");
    std::mt19937 rng(42);
    std::uniform_int_distribution<int> delay_ms(100, 1500);
    const std::string program = std::string(TUNE_SOURCE_DIR) + "/tests/support/fake_trial.py";
    auto start_driver = [&] {
        return tune::test::spawn_silenced({TUNE_BINARY, "sweep", sweep.string(), "--no-probe", "--no-report"},
                                          {{"TUNE_TRIAL_PROGRAM", program}, {"FAKE_TRIAL_SLEEP", "0.05"}});
    };
    // Eight runs killed at random moments (planning, claiming, recording, or
    // while a trial runs), then one left to finish.
    int killed = 0;
    for (int round = 0; round < 8; ++round) {
        const pid_t pid = start_driver();
        std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms(rng)));
        int status = 0;
        if (::waitpid(pid, &status, WNOHANG) == pid) break;  // it finished before the kill
        ::kill(pid, SIGKILL);
        ::waitpid(pid, &status, 0);
        ++killed;
    }
    const pid_t last = start_driver();
    int status = 0;
    ::waitpid(last, &status, 0);
    REQUIRE(WIFEXITED(status));
    REQUIRE(WEXITSTATUS(status) == 0);
    CHECK(killed > 0);

    auto integrity = run_command("sqlite3 " + (dir / "killed.db").string() + " 'PRAGMA integrity_check'");
    CHECK_THAT(integrity.output, Catch::StartsWith("ok"));
    const json trials = export_trials(dir / "killed.db")["trials"];
    CHECK(trials.size() == 24);
    std::set<std::string> hashes;
    for (const json& t : trials) {
        hashes.insert(t["config_hash"].get<std::string>());
        const std::string s = t["status"];
        CHECK((s == "ok" || s == "failed"));  // failed only when given up after repeated kills
        if (s == "failed") CHECK_THAT(t["reason"].get<std::string>(), Catch::Contains("attempts"));
    }
    CHECK(hashes.size() == 24);  // none duplicated
}

TEST_CASE("a sweep that runs trials probes its step-time rates by default, and --no-probe keeps the nominal peaks",
          "[e2e][probe]") {
    const fs::path dir = scratch("probe-default");
    const std::string space = "optimizer = [\"adamw\"]\ncontext = [64]\nmicro_batch = [2]";
    const fs::path probed = write_sweep(dir, "probed", "1GiB", space);
    const fs::path nominal = write_sweep(dir, "nominal", "1GiB", space);
    REQUIRE(run_tune("sweep " + probed.string() + " --no-report").exit_code == 0);
    REQUIRE(run_tune("sweep " + nominal.string() + " --no-probe --no-report").exit_code == 0);
    // An estimate priced with probes names the machine speed it holds for; a nominal one does not.
    const json with = export_trials(dir / "probed.db")["trials"];
    const json without = export_trials(dir / "nominal.db")["trials"];
    REQUIRE(with.size() == 1);
    REQUIRE(without.size() == 1);
    CHECK(with[0]["estimate"].contains("speed_reference_s"));
    CHECK_FALSE(without[0]["estimate"].contains("speed_reference_s"));
    // --probe stays accepted.
    CHECK(run_tune("sweep " + probed.string() + " --probe --no-report").exit_code == 0);
}
