// `tune trial --gpus N` end to end: the trial starts its own ranks through
// mpirun, rank 0 reports the combined result, and a rank that fails or dies
// ends the whole trial promptly with a result instead of leaving the others
// waiting in a collective. Every command runs under `timeout`, so a hang
// shows as exit 124 rather than a stuck test.
#include <catch2/catch.hpp>

#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "kernels/device_query.h"

#include "core/config.h"
#include "tests/support/run_command.h"

namespace {

using namespace tune;

constexpr const char* kTrial = " trial --model tiny --gpus 2 --context 32 --steps 2 --warmup 0 --threads 1";

// The JSON TrialResult on the last stdout line, and the exit code.
struct Ran {
    int exit_code = -1;
    TrialResult result;
    std::string stdout_text;
};

Ran run_trial(const std::string& env, const std::string& flags) {
    const std::string command =
        env + " timeout 120 " + std::string(TUNE_BINARY) + kTrial + " " + flags + " 2>/dev/null";
    const test::CommandResult c = test::run_command(command);
    Ran r;
    r.exit_code = c.exit_code;
    r.stdout_text = c.output;
    const std::size_t end = c.output.find_last_not_of('\n');
    const std::size_t start = end == std::string::npos ? std::string::npos : c.output.rfind('\n', end);
    const std::string last = c.output.substr(start == std::string::npos ? 0 : start + 1);
    INFO("stdout: " << c.output);
    REQUIRE(nlohmann::json::accept(last));
    r.result = nlohmann::json::parse(last).get<TrialResult>();
    return r;
}

}  // namespace

TEST_CASE("tune trial --gpus 2 runs every ZeRO stage across two ranks", "[mpi][launch]") {
    for (const char* stage : {"0", "1", "2", "3"}) {
        const Ran r = run_trial("", std::string("--zero ") + stage + " --optimizer adafactor --precision bf16-mixed");
        INFO("stage " << stage << ": " << r.result.reason);
        CHECK(r.exit_code == 0);
        CHECK(r.result.status == TrialStatus::ok);
        CHECK(r.result.config.world_size == 2);
        CHECK(r.result.rank_peaks.size() == 2);
        CHECK(r.result.comm_bytes > 0);
        CHECK(r.result.losses.size() == 2);
        CHECK(r.result.speed_reference_s > 0);  // the slowest rank's, gathered without adding to comm_bytes
    }
}

TEST_CASE("one rank out of memory ends the trial as oom, naming the rank", "[mpi][launch]") {
    // Rank 1 fails at its first allocation while rank 0 goes on into the first collective.
    const Ran r = run_trial("TUNE_TRIAL_FAULT=oom-rank-1", "--zero 3");
    INFO(r.stdout_text);
    CHECK(r.exit_code != 124);  // not left hanging
    CHECK(r.exit_code == 3);
    CHECK(r.result.status == TrialStatus::oom);
    CHECK_THAT(r.result.reason, Catch::Matchers::Contains("rank 1 of 2"));
}

TEST_CASE("a rank whose communicator fails to start ends the job as failed, not hung", "[mpi][launch]") {
    // Rank 0 goes on to its first collective; rank 1's NCCL (here MPI) init
    // fails. Without aborting the job, rank 0 would wait until the timeout.
    const Ran r = run_trial("TUNE_TRIAL_FAULT=comm-init-rank-1", "");
    INFO(r.stdout_text);
    CHECK(r.exit_code != 124);
    CHECK(r.exit_code == 5);
    CHECK(r.result.status == TrialStatus::failed);
    CHECK_THAT(r.result.reason, Catch::Matchers::Contains("rank 1 of 2"));
}

TEST_CASE("a rank killed mid-trial ends the trial as failed, not hung", "[mpi][launch]") {
    const Ran r = run_trial("TUNE_TRIAL_FAULT=kill-rank-1", "--zero 2");
    INFO(r.stdout_text);
    CHECK(r.exit_code != 124);
    CHECK(r.exit_code == 5);
    CHECK(r.result.status == TrialStatus::failed);
    CHECK_THAT(r.result.reason, Catch::Matchers::Contains("without a result"));
}

TEST_CASE("more GPU ranks than visible GPUs is refused before any rank starts", "[mpi][launch]") {
    const std::size_t visible = query_devices().devices.size();
    if (visible >= 2) {
        WARN("this machine has " << visible << " GPUs: two GPU ranks are possible, nothing to refuse");
        return;
    }
    const Ran r = run_trial("", "--backend cuda");
    CHECK(r.exit_code == 5);
    CHECK(r.result.status == TrialStatus::failed);
    CHECK_THAT(r.result.reason,
               Catch::Matchers::Contains(fmt::format("2 ranks need one GPU each, but {} visible here", visible)));
}

TEST_CASE("tune trial --gpus 2 hands the PEFT adapter folders to every rank", "[launch][mpi][lora]") {
    const std::filesystem::path fixtures = std::filesystem::path(TUNE_SOURCE_DIR) / "tests/fixtures/torch";
    const std::filesystem::path out = std::filesystem::path(TUNE_BUILD_DIR) / "test_trial_ranks_adapter";
    std::filesystem::remove_all(out);
    const auto r = test::run_tune(
        "trial --gpus 2 --backend cpu --init " + (fixtures / "llama_tiny").string() + " --init-adapter " +
        (fixtures / "llama_tiny_lora").string() + " --tokens " + (fixtures / "llama_tiny/tokens.bin").string() +
        " --micro-batch 2 --context 16 --steps 2 --warmup 1 --threads 1 --save-adapter " + out.string() + " --json");
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    // The ranks read the adapter's rank and alpha from the folder, as the parent did.
    CHECK_THAT(r.output, Catch::Contains("\"method\":\"lora\"") && Catch::Contains("\"lora_rank\":4"));
    CHECK(std::filesystem::exists(out / "adapter_config.json"));
    CHECK(std::filesystem::exists(out / "adapter_model.safetensors"));
}
