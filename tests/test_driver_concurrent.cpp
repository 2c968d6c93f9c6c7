// Trials at once: how [resources] divides the machine or allocation into
// slots (disjoint cores, disjoint GPUs, srun --exact steps under Slurm), a
// sweep whose trials overlap on disjoint cores with a stand-in trial program,
// a driver killed with SIGKILL while several trials run, `tune status` while a
// sweep runs, the makespan plan and `tune submit --dry-run`.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "driver/makespan.h"
#include "driver/slots.h"
#include "driver/sweep.h"
#include "driver/trial_child.h"
#include "store/store.h"
#include "support/run_command.h"
#include "support/tiny_cpu_sweep.h"
#include "tests/support/spawn.h"

using namespace tune;
namespace fs = std::filesystem;
using nlohmann::json;
using tune::test::run_tune;

namespace {

std::string cpu_spec() {
    return test::tiny_cpu_sweep("concurrent", R"(
[space]
optimizer = ["adamw", "lion", "adam8bit"]
zero_stage = [0, 1]
context = [64]
[trial]
steps = 3
warmup = 1
timeout = "30s"
[resources]
cpus = 2
max_concurrent = 2
)");
}

fs::path scratch(const std::string& name) {
    const fs::path dir = fs::temp_directory_path() / "tune-concurrent" / name;
    fs::remove_all(dir);
    fs::create_directories(dir);
    return dir;
}

Allocation local_machine(std::size_t gpus, int cores) {
    Allocation a;
    for (std::size_t i = 0; i < gpus; ++i) a.gpus.push_back(std::to_string(i));
    for (int c = 0; c < cores; ++c) a.cpus.push_back(c);
    return a;
}

std::vector<json> read_lines(const fs::path& path) {
    std::vector<json> out;
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);)
        if (!line.empty()) out.push_back(json::parse(line));
    return out;
}

bool overlap(const json& a, const json& b) {
    return a["start"].get<double>() < b["end"].get<double>() && b["start"].get<double>() < a["end"].get<double>();
}

// Built as a path: GCC 12 misreads the inlined std::string concatenation (a false -Wstringop-overread).
std::string fake_program() { return (fs::path(TUNE_SOURCE_DIR) / "tests/support/fake_trial.py").string(); }

// `tune sweep FILE --no-probe --no-report` in a child whose trials are the fake
// trial sleeping `sleep` seconds each, its output discarded; returns its pid.
pid_t start_fake_driver(const fs::path& sweep, const char* sleep) {
    return test::spawn_silenced({TUNE_BINARY, "sweep", sweep.string(), "--no-probe", "--no-report"},
                                {{"TUNE_TRIAL_PROGRAM", fake_program()}, {"FAKE_TRIAL_SLEEP", sleep}});
}

}  // namespace

TEST_CASE("without [resources] a sweep runs one trial at a time on every core", "[concurrent]") {
    SweepSpec spec = parse_sweep("[model]\npreset = \"tiny\"\n[hardware]\ndevice = \"cpu\"\n[space]\n", "one.toml");
    const SlotLayout layout = slot_layout(spec, local_machine(0, 4));
    REQUIRE(layout.slots.size() == 1);
    CHECK(layout.threads_per_rank == 4);
    CHECK(layout.slots[0].cpus.empty());  // not confined
}

TEST_CASE("CPU trials get disjoint core sets, their OpenMP places and affinity", "[concurrent]") {
    SweepSpec spec = parse_sweep(cpu_spec(), "c.toml");
    const SlotLayout layout = slot_layout(spec, local_machine(0, 2));
    REQUIRE(layout.slots.size() == 2);
    CHECK(layout.threads_per_rank == 1);
    CHECK(layout.slots[0].cpus == std::vector<int>{0});
    CHECK(layout.slots[1].cpus == std::vector<int>{1});
    const StepCommand step = job_step(layout.launcher, layout.slots[1], {"tune", "trial"});
    CHECK(step.cpu_affinity == std::vector<int>{1});
    CHECK(std::find(step.env.begin(), step.env.end(), std::pair<std::string, std::string>{"OMP_PLACES", "{1}"}) !=
          step.env.end());
    CHECK(step.argv == std::vector<std::string>{"tune", "trial"});
}

TEST_CASE("GPU trials get disjoint GPU sets locally and srun --exact steps inside Slurm", "[concurrent]") {
    SweepSpec spec = parse_sweep(
        "[model]\npreset = \"tiny\"\n[hardware]\ndevice = \"h100-80gb\"\ngpus = 2\n[space]\n"
        "[resources]\ngpus_per_node = 8\n",
        "g.toml");
    Allocation here = local_machine(8, 16);
    here.gpus = {"0", "1", "2", "3", "4", "5", "6", "7"};
    const SlotLayout local = slot_layout(spec, here);
    REQUIRE(local.slots.size() == 4);
    std::set<std::string> seen;
    for (const auto& slot : local.slots) {
        REQUIRE(slot.gpus.size() == 2);
        for (const auto& g : slot.gpus) CHECK(seen.insert(g).second);  // disjoint
    }
    const StepCommand step = job_step(local.launcher, local.slots[3], {"tune", "trial"});
    CHECK(std::find(step.env.begin(), step.env.end(),
                    std::pair<std::string, std::string>{"CUDA_VISIBLE_DEVICES", "6,7"}) != step.env.end());

    Allocation slurm = here;
    slurm.in_slurm = true;
    slurm.nodes = 2;
    const SlotLayout cluster = slot_layout(spec, slurm);
    CHECK(cluster.slots.size() == 8);  // 4 per node on 2 nodes
    CHECK(cluster.launcher == Launcher::srun);
    const StepCommand srun = job_step(cluster.launcher, cluster.slots[0], {"tune", "trial"});
    REQUIRE(srun.argv.size() > 2);
    CHECK(srun.argv[0] == "srun");
    CHECK(std::find(srun.argv.begin(), srun.argv.end(), "--exact") != srun.argv.end());
    CHECK(std::find(srun.argv.begin(), srun.argv.end(), "--ntasks=2") != srun.argv.end());
    CHECK(std::find(srun.argv.begin(), srun.argv.end(), "--gpus-per-node=2") != srun.argv.end());
    CHECK(srun.env.empty());  // Slurm places the step itself
}

TEST_CASE("inside Slurm a trial's job step asks for its GPUs and is named for its configuration", "[concurrent]") {
    SweepSpec spec = parse_sweep(
        "[model]\npreset = \"tiny\"\n[hardware]\ndevice = \"h100-80gb\"\n[space]\n"
        "[resources]\ngpus_per_node = 2\n",
        "g.toml");
    Allocation slurm = local_machine(2, 2);
    slurm.in_slurm = true;
    const SlotLayout layout = slot_layout(spec, slurm);
    REQUIRE(layout.slots.size() == 2);
    TrialConfig config;
    config.world_size = 1;
    const StepCommand step = trial_step(config, spec, {"tune", "trial"}, layout, 1);
    const auto has = [&](const std::string& arg) {
        return std::find(step.argv.begin(), step.argv.end(), arg) != step.argv.end();
    };
    CHECK(has("--gpus-per-node=1"));
    CHECK(has("--ntasks=1"));
    // sacct's JobName ties the step to the store's trial.
    CHECK(has("--job-name=tune-trial-" + config_hash(config)));
}

TEST_CASE("a [resources] count that is not a number or auto is refused with the fix", "[concurrent]") {
    CHECK_THROWS_WITH(parse_sweep("[model]\npreset = \"tiny\"\n[space]\n[resources]\nnodes = \"many\"\n", "r.toml"),
                      Catch::Contains("[resources] nodes: 'many' is not a count"));
    const SweepSpec automatic = parse_sweep(
        "[model]\npreset = \"tiny\"\n[space]\n[resources]\nnodes = \"auto\"\ngpus_per_node = 4\n", "r.toml");
    CHECK(automatic.resources.declared);
    CHECK(!automatic.resources.nodes);
    CHECK(automatic.resources.gpus_per_node == 4u);
}

TEST_CASE("trials run two at a time on disjoint cores, and all are recorded", "[concurrent][driver]") {
    const fs::path dir = scratch("overlap");
    ::setenv("FAKE_TRIAL_SLEEP", "1", 1);
    ::setenv("FAKE_TRIAL_LOG", (dir / "placed.jsonl").c_str(), 1);
    SweepOptions o;
    o.database = (dir / "c.db").string();
    o.progress_line = false;
    o.trial_program = {fake_program()};
    const SweepReport r = run_sweep(parse_sweep(cpu_spec(), "c.toml"), {}, o);
    ::unsetenv("FAKE_TRIAL_SLEEP");
    ::unsetenv("FAKE_TRIAL_LOG");
    CHECK(r.trials_run == 6);
    CHECK(r.counts[static_cast<std::size_t>(TrialStatus::ok)] == 6);
    const auto placed = read_lines(dir / "placed.jsonl");
    REQUIRE(placed.size() == 6);
    int overlapping = 0;
    for (std::size_t i = 0; i < placed.size(); ++i)
        for (std::size_t j = i + 1; j < placed.size(); ++j) {
            if (!overlap(placed[i], placed[j])) continue;
            ++overlapping;
            CHECK(placed[i]["cpus"] != placed[j]["cpus"]);  // disjoint single cores
        }
    CHECK(overlapping >= 2);
}

TEST_CASE("a trial planned before any baseline was measured stores its estimate with the measured baseline",
          "[concurrent][driver]") {
    Estimate planned;
    planned.memory[Component::params] = 1000;
    planned.memory.peak = 1500;
    Estimate own = planned;
    own.memory[Component::overhead] = 200;
    const Estimate filled = with_measured_baseline(planned, own);
    CHECK(filled.memory[Component::overhead] == 200);
    CHECK(filled.memory.peak == 1700);
    // A plan that already carries an overhead (learned, or a GPU's) keeps its own prediction.
    Estimate learned = planned;
    learned.memory[Component::overhead] = 150;
    learned.memory.peak = 1650;
    CHECK(with_measured_baseline(learned, own) == learned);
    CHECK(with_measured_baseline(planned, std::nullopt) == planned);
}

TEST_CASE("real trials two at a time: every stored estimate includes the process baseline", "[concurrent][driver]") {
    // The first round of concurrent trials is planned before any trial measured the baseline;
    // their stored error used to be the baseline itself (2 MiB estimated against 164 MiB).
    const fs::path dir = scratch("baseline");
    SweepOptions o;
    o.database = (dir / "b.db").string();
    o.progress_line = false;
    o.trial_program = {TUNE_BINARY, "trial"};
    std::string spec = cpu_spec();
    spec.replace(spec.find("zero_stage = [0, 1]"), 19, "zero_stage = [0]");
    const SweepReport r = run_sweep(parse_sweep(spec, "b.toml"), {}, o);
    CHECK(r.counts[static_cast<std::size_t>(TrialStatus::ok)] == 3);
    const Store store(Store::open_reader(o.database));
    for (const auto& t : store.trials({std::nullopt, TrialStatus::ok, true, false})) {
        REQUIRE(t.result.estimate);
        const auto& est = t.result.estimate->memory;
        CHECK(est[Component::overhead] > 0);
        const double error = std::fabs(static_cast<double>(est.peak) - static_cast<double>(t.result.memory.peak));
        CHECK(error / static_cast<double>(t.result.memory.peak) < 0.02);
    }
}

TEST_CASE("a driver killed with SIGKILL while two trials run resumes them, nothing lost or duplicated",
          "[concurrent][driver]") {
    const fs::path dir = scratch("kill");
    const fs::path sweep = dir / "killed.toml";
    std::ofstream(sweep) << cpu_spec() << "[output]\ndatabase = \"" << (dir / "killed.db").string() << "\"\n";
    auto start_driver = [&] { return start_fake_driver(sweep, "2"); };
    auto running_now = [&]() -> std::uint64_t {
        if (!fs::exists(dir / "killed.db")) return 0;
        try {
            const Store store(Store::open_reader((dir / "killed.db").string()));
            const auto s = store.find_sweep("concurrent");
            return s ? s->count(TrialStatus::running) : 0;
        } catch (const std::exception&) {
            return 0;  // the driver is still creating the file
        }
    };
    const pid_t pid = start_driver();
    for (int i = 0; i < 200 && running_now() < 2; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    REQUIRE(running_now() == 2);
    // `tune status` reads the sweep while the driver writes it.
    const auto status = run_tune("status --db " + (dir / "killed.db").string());
    CHECK(status.exit_code == 0);
    CHECK_THAT(status.output, Catch::Contains("running 2"));
    CHECK_THAT(status.output, Catch::Contains("running: trial"));
    ::kill(pid, SIGKILL);
    int wait_status = 0;
    ::waitpid(pid, &wait_status, 0);
    CHECK(running_now() == 2);  // as the dead driver left them

    const pid_t again = start_driver();
    ::waitpid(again, &wait_status, 0);
    REQUIRE(WIFEXITED(wait_status));
    CHECK(WEXITSTATUS(wait_status) == 0);
    const Store store(Store::open_reader((dir / "killed.db").string()));
    const auto trials = store.trials({std::nullopt, std::nullopt, false, false});
    REQUIRE(trials.size() == 6);
    std::set<std::string> hashes;
    int rerun = 0;
    for (const auto& t : trials) {
        hashes.insert(t.config_hash);
        CHECK(t.result.status == TrialStatus::ok);
        CHECK(t.measured);
        rerun += t.attempts == 2 ? 1 : 0;
    }
    CHECK(hashes.size() == 6);
    CHECK(rerun == 2);  // the two in flight ran again, once each
    const auto done = run_tune("status --db " + (dir / "killed.db").string());
    CHECK_THAT(done.output, Catch::Contains("6/6 done"));
    CHECK_THAT(done.output, Catch::Contains("ETA done"));
}

TEST_CASE("a driver whose terminal closes (SIGHUP) finishes its running trials and stops as on SIGTERM",
          "[concurrent][driver]") {
    const fs::path dir = scratch("hangup");
    const fs::path sweep = dir / "hangup.toml";
    std::ofstream(sweep) << cpu_spec() << "[output]\ndatabase = \"" << (dir / "hangup.db").string() << "\"\n";
    const pid_t pid = start_fake_driver(sweep, "1");
    auto count = [&](TrialStatus status) -> std::uint64_t {
        if (!fs::exists(dir / "hangup.db")) return 0;
        try {
            const Store store(Store::open_reader((dir / "hangup.db").string()));
            const auto s = store.find_sweep("concurrent");
            return s ? s->count(status) : 0;
        } catch (const std::exception&) {
            return 0;
        }
    };
    for (int i = 0; i < 200 && count(TrialStatus::running) < 1; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    REQUIRE(count(TrialStatus::running) >= 1);
    ::kill(pid, SIGHUP);
    int wait_status = 0;
    ::waitpid(pid, &wait_status, 0);
    CHECK(WIFEXITED(wait_status));  // not killed by the signal (exit 129)
    CHECK(count(TrialStatus::running) == 0);
    CHECK(count(TrialStatus::ok) >= 1);  // the trials in flight finished
    CHECK(count(TrialStatus::ok) < 6);   // and the sweep stopped early
}

TEST_CASE("the makespan plan packs estimated trials onto the slots in run order", "[concurrent][plan]") {
    const SweepSpec spec = parse_sweep(cpu_spec(), "c.toml");
    std::vector<NewTrial> plan(5);
    for (std::size_t i = 0; i < plan.size(); ++i) {
        plan[i].estimate = Estimate{};
        plan[i].estimate->step_s = 1.0;  // each trial: start-up + its 3 steps of 1 s (warmup included)
        plan[i].priority = static_cast<double>(i);
    }
    plan[4].status = TrialStatus::pruned;  // never runs
    const double one = predicted_trial_s(*plan[0].estimate, spec);
    CHECK(one > 3.0);
    const MakespanPrediction serial = predict_makespan(plan, spec, 1, 1);
    CHECK(serial.trials == 4);
    CHECK(serial.makespan_s == Approx(4 * one));
    const MakespanPrediction two = predict_makespan(plan, spec, 2, 1);
    CHECK(two.makespan_s == Approx(2 * one));
    CHECK(two.serial_s == Approx(4 * one));
    const MakespanPrediction three = predict_makespan(plan, spec, 3, 1);
    CHECK(three.makespan_s == Approx(2 * one));  // the fourth waits for a slot
}

TEST_CASE("tune sweep --plan-only --nodes N predicts a shorter makespan on more nodes and runs nothing",
          "[concurrent][plan]") {
    const fs::path dir = scratch("plan");
    const fs::path sweep = dir / "plan.toml";
    std::string text = cpu_spec();
    text.erase(text.find("max_concurrent"));
    std::ofstream(sweep) << text << "[output]\ndatabase = \"" << (dir / "plan.db").string() << "\"\n";
    const auto one = run_tune("sweep " + sweep.string() + " --plan-only --nodes 1");
    const auto four = run_tune("sweep " + sweep.string() + " --plan-only --nodes 4");
    REQUIRE(one.exit_code == 0);
    REQUIRE(four.exit_code == 0);
    CHECK_THAT(one.output, Catch::Contains("2 at a time on 1 node(s)"));
    CHECK_THAT(four.output, Catch::Contains("8 at a time on 4 node(s)"));  // a core per trial on 2-core nodes
    CHECK_THAT(one.output, Catch::Contains("Predicted makespan"));
    CHECK(!fs::exists(dir / "plan.db"));
}

TEST_CASE("tune submit --dry-run prints a requeueable batch script that resumes the sweep", "[concurrent][submit]") {
    const fs::path dir = scratch("submit");
    const fs::path sweep = dir / "s.toml";
    std::ofstream(sweep) << cpu_spec();
    const auto r =
        run_tune("submit " + sweep.string() + " --nodes 2 --partition debug --time 90m --account ml --dry-run");
    REQUIRE(r.exit_code == 0);
    for (const char* line : {"#SBATCH --nodes=2", "#SBATCH --partition=debug", "#SBATCH --time=0-01:30:00",
                             "#SBATCH --account=ml", "#SBATCH --requeue", "#SBATCH --signal=B:INT@90", " sweep "})
        CHECK_THAT(r.output, Catch::Contains(line));
    CHECK_THAT(r.output, Catch::StartsWith("#!/bin/bash"));
    const auto bad = run_tune("submit " + sweep.string() + " --time soon --dry-run");
    CHECK(bad.exit_code == 2);
    CHECK_THAT(bad.output, Catch::Contains("--time soon"));
    // Limits Slurm's days cannot count are refused, not wrapped to no limit.
    for (const char* time : {"1e300h", "18446744073709551616s", "1e19s", "366d"}) {
        INFO(time);
        const auto huge = run_tune("submit " + sweep.string() + " --time " + time + " --dry-run");
        CHECK(huge.exit_code == 2);
        CHECK_THAT(huge.output, Catch::Contains("from 1s to 365d"));
    }
    CHECK_THAT(run_tune("submit " + sweep.string() + " --time 365d --dry-run").output,
               Catch::Contains("#SBATCH --time=365-00:00:00"));
}

TEST_CASE("tune submit writes no line, option or path a sweep name or flag did not mean", "[concurrent][submit]") {
    const fs::path dir = scratch("submit-hostile");
    const fs::path sweep = dir / "s.toml";
    std::string text = cpu_spec();
    // No '/' or '..': the sweep reader refuses those in any name (tests/sweeps_bad/38).
    text.replace(text.find("name = \"concurrent\""), 19, "name = \"x\\ntouch P\\n# --a=b up\"");
    std::ofstream(sweep) << text;
    const auto r = run_tune("submit " + sweep.string() + " --dry-run");
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    std::istringstream lines(r.output);
    for (std::string line; std::getline(lines, line);) {
        CHECK_FALSE(line.starts_with("touch"));
        if (line.starts_with("#SBATCH")) CHECK(line.find(' ', 8) == std::string::npos);  // one option a line
    }
    CHECK_THAT(r.output, Catch::Contains("#SBATCH --job-name=tune-x_touch_P___--a_b_up\n"));
    // Values sbatch would split or read as more options are refused, naming the flag.
    for (const char* flag : {"--partition 'gpu --exclusive'", "--account 'a\nb'"}) {
        const auto bad = run_tune("submit " + sweep.string() + " " + flag + " --dry-run");
        CHECK(bad.exit_code == 2);
        CHECK_THAT(bad.output, Catch::Contains("a Slurm name has only letters"));
    }
}

TEST_CASE("a sweep that runs here refuses more cpus than this process may use, validate takes the file",
          "[concurrent][driver][hostile]") {
    const fs::path dir = scratch("too-many-cpus");
    const fs::path sweep = dir / "cpus.toml";
    std::string text = cpu_spec();
    text.replace(text.find("cpus = 2"), 8, "cpus = 65536");
    std::ofstream(sweep) << text << "[output]\ndatabase = \"" << (dir / "cpus.db").string() << "\"\n";
    const auto r = run_tune("sweep " + sweep.string() + " --no-probe --no-report");
    INFO(r.output);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.output, Catch::Contains("[resources] cpus = 65536: this process may run on"));
    CHECK_FALSE(fs::exists(dir / "cpus.db"));                      // refused before the database, and before any trial
    CHECK(run_tune("validate " + sweep.string()).exit_code == 0);  // a cluster's file is still a valid file
}
