// `tune trial` end to end: the JSON TrialResult is the last stdout line, the
// exit code tells the status, and the test-only faults behave as the sweep
// driver expects.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/config.h"
#include "support/run_command.h"

using namespace tune;

namespace {

nlohmann::json last_json(const std::string& output) {
    const auto end = output.find_last_not_of('\n');
    const auto start = output.rfind('\n', end);
    return nlohmann::json::parse(output.substr(start == std::string::npos ? 0 : start + 1, end - start));
}

// stdout only (stderr dropped), so the last line is the result.
test::CommandResult trial(const std::string& args, const std::string& env = "") {
    return test::run_command(env + " " + std::string(TUNE_BINARY) + " trial --threads 1 " + args + " 2>/dev/null");
}

const std::string kFixture = std::string(TUNE_SOURCE_DIR) + "/tests/fixtures/torch/llama_tiny";

// A one-layer model of hidden 32 at context 16: a whole TrialConfig for --config.
TrialConfig small_config(Optimizer optimizer, std::uint32_t steps) {
    TrialConfig c;
    c.model = ModelSpec{"custom", 64, 32, 1, 4, 4, 64, 64, 1e-5, 10000.0};
    c.optimizer = optimizer;
    c.steps = steps;
    c.warmup = 0;
    c.context = 16;
    return c;
}

}  // namespace

TEST_CASE("tune trial prints per-step lines and a TrialResult, exit 0", "[trial][cli]") {
    // stderr and stdout merged: the progress lines, then the JSON as the last line.
    const auto out = test::run_tune(
        "trial --threads 1 --model tiny --optimizer adamw --precision bf16-mixed --micro-batch 2 "
        "--context 32 --grad-accum 2 --checkpointing full --steps 3 --warmup 1 --json");
    CHECK(out.exit_code == 0);
    CHECK_THAT(out.output, Catch::Contains("step   1/3 | loss"));
    CHECK_THAT(out.output, Catch::Contains("MFU"));
    const TrialResult r = last_json(out.output).get<TrialResult>();
    CHECK(r.status == TrialStatus::ok);
    CHECK(r.config.checkpointing == Checkpointing::full);
    CHECK(r.config.precision == Precision::bf16_mixed);
    CHECK(r.config.grad_accum == 2);
    CHECK(r.losses.size() == 3);
    CHECK(r.step_ms.size() == 3);
    CHECK(r.tokens_per_s > 0);
    CHECK(r.memory.peak > 0);
    CHECK_FALSE(r.memory.peak_phase.empty());
    REQUIRE(r.estimate);
    CHECK(r.estimate->memory.peak > 0);
}

TEST_CASE("tune trial exit codes: oom 3, invalid 4, failed 5", "[trial][cli]") {
    auto oom = trial("--model tiny --memory-limit 64KiB");
    CHECK(oom.exit_code == 3);
    const TrialResult r = last_json(oom.output).get<TrialResult>();
    CHECK(r.status == TrialStatus::oom);
    CHECK(r.oom_requested > 0);
    CHECK(r.oom_requested + r.oom_live > 64 * 1024);

    auto invalid = trial("--model tiny --optimizer lomo --grad-accum 4");
    CHECK(invalid.exit_code == 4);
    CHECK(last_json(invalid.output)["status"] == "invalid");

    auto bad = trial("--model tiny --optimizer sgd");
    CHECK(bad.exit_code == 2);
}

TEST_CASE("TUNE_TRIAL_FAULT makes a trial crash, fail on NaN or run out of memory", "[trial][cli]") {
    CHECK(trial("--model tiny --steps 2", "TUNE_TRIAL_FAULT=crash").exit_code >= 128);
    auto nan = trial("--model tiny --steps 2", "TUNE_TRIAL_FAULT=nan");
    CHECK(nan.exit_code == 5);
    CHECK(last_json(nan.output)["status"] == "failed");
    CHECK_THAT(last_json(nan.output)["reason"].get<std::string>(), Catch::Contains("nan"));
    auto oom = trial("--model tiny --steps 2", "TUNE_TRIAL_FAULT=oom");
    CHECK(oom.exit_code == 3);
    CHECK(last_json(oom.output)["status"] == "oom");
}

TEST_CASE("tune trial --init and --tokens train the fixture model", "[trial][cli]") {
    auto out = trial("--init " + kFixture + " --tokens " + kFixture +
                     "/tokens.bin --micro-batch 2 --context 16 "
                     "--steps 3 --warmup 0 --lr 1e-3 --weight-decay 0.1 --clip 1");
    REQUIRE(out.exit_code == 0);
    const TrialResult r = last_json(out.output).get<TrialResult>();
    CHECK(r.config.model.hidden == 32);
    CHECK(r.config.model.vocab == 64);
    // The same losses PyTorch computed for these weights and tokens (make_torch_fixtures.py).
    REQUIRE(r.losses.size() == 3);
    CHECK(r.losses[0] == Approx(4.4045796).epsilon(1e-5));
    CHECK(r.losses[1] == Approx(4.3107815).epsilon(1e-5));
    CHECK(r.losses[2] == Approx(4.4179010).epsilon(1e-5));

    // A token file that cannot be read is bad input (exit 2, issue 14 item 16), not a trial outcome.
    auto missing = test::run_tune("trial --threads 1 --model tiny --tokens /nonexistent/tokens.bin");
    CHECK(missing.exit_code == 2);
    CHECK_THAT(missing.output, Catch::Contains("/nonexistent/tokens.bin: cannot open"));
}

TEST_CASE("tune trial --config takes a whole TrialConfig and flags override it", "[trial][cli]") {
    const TrialConfig c = small_config(Optimizer::lion, 2);
    const std::string json = nlohmann::json(c).dump();
    auto out = trial("--config '" + json + "' --precision bf16");
    REQUIRE(out.exit_code == 0);
    const TrialResult r = last_json(out.output).get<TrialResult>();
    CHECK(r.config.model == c.model);
    CHECK(r.config.optimizer == Optimizer::lion);
    CHECK(r.config.precision == Precision::bf16);
    CHECK(r.losses.size() == 2);
}

TEST_CASE("tune trial --config also reads a file, and names it when it is bad", "[trial][cli]") {
    const TrialConfig c = small_config(Optimizer::adafactor, 1);
    const std::filesystem::path dir = std::filesystem::temp_directory_path() / "tune_trial_config_file";
    std::filesystem::create_directories(dir);
    const std::filesystem::path file = dir / "config.json";
    std::ofstream(file) << nlohmann::json(c).dump(2);
    auto out = trial("--config " + file.string());
    REQUIRE(out.exit_code == 0);
    CHECK(last_json(out.output).get<TrialResult>().config.optimizer == Optimizer::adafactor);

    std::ofstream(dir / "broken.json") << "{\"optimizer\": ";
    auto broken = test::run_tune("trial --config " + (dir / "broken.json").string());
    CHECK(broken.exit_code == 2);
    CHECK_THAT(broken.output, Catch::Contains("--config " + (dir / "broken.json").string() + ": "));
    auto missing = test::run_tune("trial --config /nonexistent/config.json");
    CHECK(missing.exit_code == 2);
    CHECK_THAT(missing.output, Catch::Contains("/nonexistent/config.json"));
    std::filesystem::remove_all(dir);
}

TEST_CASE("tune trial refuses flag values the sweep file refuses, exit 2", "[trial][cli]") {
    // Each once crashed or was accepted: SIGFPE, an OpenMP abort, a negative count.
    for (const char* flags : {"--adam8bit-block 0", "--adam8bit-block 100", "--threads -5", "--threads 100000",
                              "--steps 3 --warmup 3", "--lr -1"}) {
        INFO(flags);
        const auto out = test::run_tune(std::string("trial --model tiny ") + flags);
        CHECK(out.exit_code == 2);
        CHECK_FALSE(out.output.empty());
    }
    // --steps alone keeps a measured step: the default warmup (2) gives way.
    CHECK(trial("--model tiny --steps 2 --context 16").exit_code == 0);
}

TEST_CASE("a trial whose estimate exceeds the memory it may use is refused as oom, unless --force", "[trial][cli]") {
    // llama-7b on the CPU estimates ~109 GB: it once allocated until the machine died.
    auto out = trial("--model llama-7b --backend cpu --steps 2 --warmup 1");
    CHECK(out.exit_code == 3);
    const TrialResult r = last_json(out.output).get<TrialResult>();
    CHECK(r.status == TrialStatus::oom);
    CHECK_THAT(r.reason, Catch::Contains("oom-predicted"));
    CHECK(r.oom_requested > 0);

    // A limit below the estimate of tiny: refused without --force, a real OOM with it.
    auto refused = trial("--model tiny --backend cpu --memory-limit 1MiB");
    CHECK(refused.exit_code == 3);
    CHECK_THAT(last_json(refused.output)["reason"].get<std::string>(), Catch::Contains("oom-predicted"));
    auto forced = trial("--model tiny --backend cpu --memory-limit 1MiB --force");
    CHECK(forced.exit_code == 3);
    CHECK_THAT(last_json(forced.output)["reason"].get<std::string>(), !Catch::Contains("oom-predicted"));
}

TEST_CASE("a trial whose steps vary more than --max-cv runs more steps, up to --max-steps", "[trial][cli][noise]") {
    const std::string base = "trial --threads 1 --model tiny --micro-batch 1 --context 16 --steps 3 --warmup 1 --json ";
    // Any two timed steps differ by more than 1e-9 of their mean: it runs to the cap.
    const auto noisy = test::run_tune(base + "--max-cv 1e-9 --max-steps 5");
    CHECK(noisy.exit_code == 0);
    const TrialResult n = last_json(noisy.output).get<TrialResult>();
    CHECK(n.step_ms.size() == 5);
    CHECK(n.step_stats.count == 4);
    CHECK(n.speed_reference_s > 0);  // the machine's pace beside the steps (core/machine_speed.h)
    CHECK(n.step_stats.cv > 0);
    CHECK_THAT(noisy.output, Catch::Contains("more while the timed steps' CV is above"));
    CHECK_THAT(noisy.output, Catch::Contains("step   5/3+"));
    CHECK_THAT(noisy.output, Catch::Contains("timing: 4 timed steps"));
    // No trial varies by 1000%: the configured steps only.
    const auto quiet = test::run_tune(base + "--max-cv 10 --max-steps 5");
    CHECK(last_json(quiet.output).get<TrialResult>().step_ms.size() == 3);
}

TEST_CASE("tune trial refuses more ranks than one host can start before any launcher runs", "[trial][cli][hostile]") {
    // Before this, mpirun -np 100000 started and spun at 100% until killed.
    const auto r = test::run_tune("trial --model tiny --gpus 100000 --steps 2");
    INFO(r.output);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.output, Catch::Contains("--gpus: 100000 ranks would run on this one host (at most 256") &&
                             !Catch::Contains("via mpirun"));
}
