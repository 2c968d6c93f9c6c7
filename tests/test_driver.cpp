// The sweep driver end to end with a stand-in trial program
// (tests/support/fake_trial.py), so statuses, isolation, resume and ordering
// are tested without training; tests/test_sweep_e2e.cpp runs real trials.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <set>

#include "core/pareto.h"
#include "driver/calibration.h"
#include "driver/plan.h"
#include "driver/sweep.h"
#include "estimate/estimate.h"
#include "store/best.h"
#include "store/store.h"
#include "tests/support/tiny_cpu_sweep.h"

using namespace tune;
namespace fs = std::filesystem;

namespace {

std::string driver_spec() {
    return test::tiny_cpu_sweep("driver-test", R"(
[space]
optimizer = ["adamw", "lion", "adam8bit", "adafactor", "lomo"]
zero_stage = [0, 1]
grad_accum = [1, 2]
context = [64]
[trial]
steps = 3
warmup = 1
timeout = "1s"
)");
}

std::string fresh_db(const std::string& name) {
    const fs::path dir = fs::temp_directory_path() / "tune-driver-tests";
    fs::create_directories(dir);
    const fs::path db = dir / (name + ".db");
    for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(db.string() + suffix);
    return db.string();
}

SweepOptions fake_options(const std::string& db) {
    SweepOptions o;
    o.database = db;
    o.progress_line = false;
    o.trial_program = {std::string(TUNE_SOURCE_DIR) + "/tests/support/fake_trial.py"};
    return o;
}

struct FaultEnv {
    FaultEnv() {
        ::setenv("FAKE_TRIAL_FAULT_lion", "crash", 1);
        ::setenv("FAKE_TRIAL_FAULT_adafactor", "hang", 1);
        ::setenv("FAKE_TRIAL_FAULT_lomo", "nan", 1);
        ::setenv("FAKE_TRIAL_FAULT_adam8bit", "oom", 1);
    }
    ~FaultEnv() {
        for (const char* o : {"lion", "adafactor", "lomo", "adam8bit"})
            ::unsetenv((std::string("FAKE_TRIAL_FAULT_") + o).c_str());
    }
};

std::uint64_t n(const SweepReport& r, TrialStatus s) { return r.counts[static_cast<std::size_t>(s)]; }

}  // namespace

TEST_CASE("a trial that exits 3 without its result line is recorded as oom, with the rank's message", "[driver]") {
    ::setenv("FAKE_TRIAL_FAULT_adamw", "oom-lost", 1);
    const std::string db = fresh_db("oom-lost");
    const SweepReport r = run_sweep(parse_sweep(driver_spec(), "driver-test.toml"), {}, fake_options(db));
    ::unsetenv("FAKE_TRIAL_FAULT_adamw");
    Store store(db, Store::Mode::read_only);
    int adamw = 0;
    for (const auto& t : store.trials({r.sweep, std::nullopt, false, false}))
        if (t.result.config.optimizer == Optimizer::adamw && t.result.status != TrialStatus::pruned) {
            ++adamw;
            CHECK(t.result.status == TrialStatus::oom);
            CHECK_THAT(t.result.reason, Catch::Contains("rank 1 of 2: out of memory"));
        }
    CHECK(adamw == 4);
}

TEST_CASE("a sweep records every outcome, faults included, and its front is the true front", "[driver]") {
    FaultEnv faults;
    const std::string db = fresh_db("faults");
    const SweepReport r = run_sweep(parse_sweep(driver_spec(), "driver-test.toml"), {}, fake_options(db));
    CHECK_FALSE(r.estimate_only);
    CHECK(r.trials_run == 18);
    CHECK(n(r, TrialStatus::ok) == 4);       // adamw
    CHECK(n(r, TrialStatus::failed) == 6);   // lion crashes (4), lomo NaN (2)
    CHECK(n(r, TrialStatus::timeout) == 4);  // adafactor hangs
    CHECK(n(r, TrialStatus::oom) == 4);      // adam8bit
    CHECK(n(r, TrialStatus::invalid) == 2);  // lomo with grad_accum 2
    CHECK(n(r, TrialStatus::pending) == 0);
    CHECK(n(r, TrialStatus::running) == 0);
    CHECK(r.calibrated_trials == 4);  // calibration learns from the ok trials alone

    Store store(db, Store::Mode::read_only);
    const auto trials = store.trials({r.sweep, std::nullopt, false, false});
    REQUIRE(trials.size() == 20);
    for (const auto& t : trials) {
        INFO(summary(t.result.config) << " " << to_string(t.result.status) << ": " << t.result.reason);
        if (t.result.config.optimizer == Optimizer::lion) {
            CHECK_THAT(t.result.reason, Catch::Contains("killed by signal 6"));
            CHECK_THAT(t.stderr_tail, Catch::Contains("fake trial starting"));
        }
        if (t.result.status == TrialStatus::timeout) CHECK(t.result.config.optimizer == Optimizer::adafactor);
        if (t.result.status == TrialStatus::ok) CHECK(t.result.estimate.has_value());
    }

    // The recorded front against a brute-force check of the ok rows.
    std::vector<const TrialRecord*> ok;
    for (const auto& t : trials)
        if (t.result.status == TrialStatus::ok) ok.push_back(&t);
    std::set<TrialId> expected;
    for (const TrialRecord* a : ok) {
        bool dominated = false;
        for (const TrialRecord* b : ok)
            dominated = dominated || dominates({double(b->result.memory.peak), b->result.tokens_per_s},
                                               {double(a->result.memory.peak), a->result.tokens_per_s});
        if (!dominated) expected.insert(a->id);
    }
    std::set<TrialId> front;
    for (const auto& t : store.pareto_front(r.sweep)) front.insert(t.id);
    CHECK(front == expected);
    CHECK_FALSE(front.empty());
}

TEST_CASE("running a finished sweep again runs nothing, a changed spec is refused", "[driver]") {
    const std::string db = fresh_db("resume");
    const SweepSpec spec = parse_sweep(driver_spec(), "driver-test.toml");
    const SweepReport first = run_sweep(spec, {}, fake_options(db));
    CHECK(first.trials_run == 18);
    const SweepReport again = run_sweep(spec, {}, fake_options(db));
    CHECK(again.trials_run == 0);
    CHECK(again.counts == first.counts);

    const SweepSpec changed = parse_sweep(std::string(driver_spec()) + "\n# edited\n", "driver-test.toml");
    CHECK_THROWS_WITH(run_sweep(changed, {}, fake_options(db)), Catch::Contains("--restart"));
    SweepOptions restart = fake_options(db);
    restart.restart = true;
    restart.max_trials = 2;
    CHECK(run_sweep(changed, {}, restart).trials_run == 2);
}

TEST_CASE("estimate-only sweeps and limits run nothing or stop early", "[driver]") {
    const SweepSpec spec = parse_sweep(driver_spec(), "driver-test.toml");
    SweepOptions dry = fake_options(fresh_db("dry"));
    dry.dry_run = true;
    const SweepReport d = run_sweep(spec, {}, dry);
    CHECK(d.estimate_only);
    CHECK(d.estimate_only_reason == "--dry-run was given");
    CHECK(d.trials_run == 0);
    CHECK(n(d, TrialStatus::pending) == 18);

    SweepSpec gpu = parse_sweep(R"(
[model]
preset = "llama-7b"
[hardware]
device = "h100-80gb"
gpus = 8
[space]
optimizer = ["adamw", "lomo"]
)",
                                "gpu.toml");
    SweepEnvironment no_gpu;
    no_gpu.why_no_gpu = "no NVIDIA driver is installed";
    const SweepReport g = run_sweep(gpu, no_gpu, fake_options(fresh_db("gpu")));
    CHECK(g.estimate_only);
    CHECK_THAT(g.estimate_only_reason, Catch::Contains("h100-80gb GPUs and none is visible here (no NVIDIA driver"));

    SweepOptions limited = fake_options(fresh_db("limited"));
    limited.max_trials = 3;
    const SweepReport m = run_sweep(spec, {}, limited);
    CHECK(m.trials_run == 3);
    CHECK(m.max_trials_reached);
}

TEST_CASE("a GPU sweep starts from the device baseline its probes measured, with the pool's slack", "[driver]") {
    SweepSpec gpu = parse_sweep(R"(
[model]
preset = "llama-7b"
[hardware]
device = "h100-80gb"
[space]
optimizer = ["adamw"]
)",
                                "gpu.toml");
    CHECK(base_estimate_options(gpu).overhead_per_activation_byte == 0.0);  // the preset's round figure holds it
    auto probed = std::make_shared<ProbedRates>();
    probed->device_baseline_bytes = 557ull << 20;
    gpu.probed = probed;
    const EstimateOptions o = base_estimate_options(gpu);
    CHECK(o.overhead_per_activation_byte == prior_overhead_slope(BackendKind::cuda));
    TrialConfig c;
    c.model = gpu.model;
    c.precision = Precision::bf16;
    c.checkpointing = Checkpointing::full;
    const Estimate e = estimate(c, gpu.hardware, o);
    const double act = static_cast<double>(e.memory[Component::activations]);
    CHECK(static_cast<double>(e.memory[Component::overhead]) ==
          Approx(static_cast<double>(557ull << 20) + prior_overhead_slope(BackendKind::cuda) * act));
}

TEST_CASE("the budget stops the sweep from starting trials it cannot finish", "[driver]") {
    ::setenv("FAKE_TRIAL_SLEEP", "0.3", 1);
    SweepSpec spec = parse_sweep(driver_spec(), "driver-test.toml");
    spec.budget_s = 1.0;
    const SweepReport r = run_sweep(spec, {}, fake_options(fresh_db("budget")));
    ::unsetenv("FAKE_TRIAL_SLEEP");
    CHECK(r.budget_reached);
    CHECK(r.trials_run >= 1);
    CHECK(r.trials_run <= 4);
}

TEST_CASE("pruning drops what cannot fit, with the estimate in the reason", "[driver]") {
    SweepSpec spec = parse_sweep(R"(
[model]
preset = "small"
[hardware]
device = "cpu"
memory_limit = "48MiB"
[space]
optimizer = ["adamw", "lomo"]
precision = ["fp32", "bf16"]
context = [128, 1024]
micro_batch = [1, 8]
)",
                                 "prune.toml");
    SweepOptions o = fake_options(fresh_db("prune"));
    o.dry_run = true;
    const SweepReport r = run_sweep(spec, {}, o);
    REQUIRE(n(r, TrialStatus::pruned) > 0);
    REQUIRE(n(r, TrialStatus::pending) > 0);
    Store store(o.database, Store::Mode::read_only);
    for (const auto& t : store.trials({r.sweep, TrialStatus::pruned, false, false})) {
        REQUIRE(t.result.estimate);
        CHECK(double(t.result.estimate->memory.peak) > double(spec.usable_memory()) * 1.02);
        CHECK_THAT(t.result.reason, Catch::Contains("exceeds the usable"));
    }
}

TEST_CASE("a sweep for a framework prunes and refuses by that stack's prediction, and best answers for it",
          "[driver][frameworks]") {
    const SweepSpec spec = parse_sweep(R"(
[model]
preset = "llama-7b"
[hardware]
device = "a10g"
gpus = 2
[space]
method = ["lora"]
precision = ["bf16"]
zero_stage = [0, 1, 2]
checkpointing = ["none", "full"]
context = [512, 1024, 2048]
micro_batch = [1, 2, 4, 8]
[framework]
name = "accelerate-fsdp"
)",
                                       "fsdp.toml");
    REQUIRE(spec.framework == FrameworkProfile::accelerate_fsdp);
    SweepOptions o = fake_options(fresh_db("framework"));
    o.dry_run = true;
    const SweepReport r = run_sweep(spec, {}, o);
    Store store(o.database, Store::Mode::read_only);
    REQUIRE(store.find_sweep(spec.name)->record.framework == "accelerate-fsdp");
    const double usable = static_cast<double>(spec.usable_memory());
    std::size_t framework_only = 0;
    for (const TrialRecord& t : store.trials({r.sweep, std::nullopt, false, false})) {
        INFO(summary(t.result.config) << ": " << t.result.reason);
        CHECK(t.sweep_framework == "accelerate-fsdp");
        if (t.result.config.zero_stage == 1) {
            // FSDP has no ZeRO-1: invalid for this sweep's stack, with its reason.
            CHECK(t.result.status == TrialStatus::invalid);
            CHECK_THAT(t.result.reason, Catch::Contains("[framework] accelerate-fsdp cannot run it: ZeRO-1"));
            continue;
        }
        const FrameworkPrediction& p = t.frameworks.at("accelerate-fsdp");
        CHECK(t.frameworks.size() == kFrameworkProfileNames.size() - 1);
        if (t.result.status == TrialStatus::pending) CHECK(double(p.device) <= usable * 1.02);
        if (t.result.status == TrialStatus::pruned &&
            t.result.reason.starts_with("accelerate-fsdp is predicted to use")) {
            CHECK(double(p.device) > usable * 1.02);
            // Our engine alone would have run it: the stack's prediction decided.
            if (double(t.result.estimate->memory.peak) <= usable) ++framework_only;
        }
    }
    CHECK(framework_only > 0);
    // best answers for the sweep's stack unless told otherwise.
    const BestAnswer fsdp = find_best_predicted(store, {});
    REQUIRE_FALSE(fsdp.ranked.empty());
    CHECK(fsdp.framework == "accelerate-fsdp");
    for (const TrialRecord& t : fsdp.ranked) {
        REQUIRE(t.answered_for);
        CHECK(t.answered_for->device == t.frameworks.at("accelerate-fsdp").device);
    }
    BestQuery engine;
    engine.framework = "tune";
    const BestAnswer ours = find_best_predicted(store, engine);
    CHECK(ours.framework == "tune");
    CHECK_FALSE(ours.ranked.front().answered_for);
    // Another stack re-ranks from the same rows: a tight --max-memory under hf-trainer, which
    // holds fp32 logits over the vocabulary, admits fewer than under our engine.
    BestQuery hf;
    hf.framework = "hf-trainer";
    hf.top = 1000;
    engine.top = 1000;
    // A limit that admits every configuration our engine predicts to fit.
    std::uint64_t limit = 0;
    for (const TrialRecord& t : find_best_predicted(store, engine).ranked)
        limit = std::max(limit, t.result.estimate->memory.peak);
    hf.max_memory = engine.max_memory = limit;
    const BestAnswer a = find_best_predicted(store, hf), b = find_best_predicted(store, engine);
    CHECK(a.framework == "hf-trainer");
    CHECK(a.qualifying < b.qualifying);
    for (const TrialRecord& t : a.ranked) CHECK(t.answered_for->device <= limit);
}
