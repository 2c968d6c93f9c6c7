// The scripts a lent GPU machine runs (scripts/gpu-validate.sh, gpu-peer.sh
// with gpu_peer.py, gpu-bundle.sh, gpu-results.sh), checked where they cannot
// run: they parse, the results file they append to starts with its header,
// the prepared run keeps its parts' order and its deadline, and the peer
// benchmark's dry run lists every run it would make with commands tune and
// its Python side accept.
#include <catch2/catch.hpp>

#include <cstdio>
#include <fstream>
#include <string>

#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tests/support/run_command.h"

using tune::test::run_command;

namespace {

std::string script(const char* name) { return std::string(TUNE_SOURCE_DIR) + "/scripts/" + name; }

int count_of(const std::string& text, const std::string& what) {
    int n = 0;
    for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
}

}  // namespace

TEST_CASE("the GPU machine's scripts parse", "[scripts]") {
    for (const char* name : {"gpu-validate.sh", "gpu-peer.sh", "gpu-bundle.sh", "gpu-results.sh"}) {
        const auto r = run_command(fmt::format("bash -n '{}' 2>&1", script(name)));
        INFO(name << ": " << r.output);
        CHECK(r.exit_code == 0);
    }
    for (const char* name : {"gpu_peer.py", "hf-memory-check.py"}) {
        const auto compiled = run_command(fmt::format("python3 -m py_compile '{}' 2>&1", script(name)));
        INFO(name << ": " << compiled.output);
        CHECK(compiled.exit_code == 0);
    }
}

TEST_CASE("the GPU checks append to one dated results file, which starts with its header", "[scripts]") {
    const std::string file = fmt::format("{}/tune_gpu_results_{}.md", TUNE_BUILD_DIR, ::getpid());
    std::remove(file.c_str());
    const std::string command = fmt::format("GPU_RESULTS='{}' bash '{}' 2>&1", file, script("gpu-results.sh"));
    const auto first = run_command(command);
    INFO(first.output);
    REQUIRE(first.exit_code == 0);
    CHECK(first.output == file + "\n");
    run_command(fmt::format("echo '## a section' >> '{}'", file));
    CHECK(run_command(command).exit_code == 0);  // an existing file keeps what was appended
    const auto text = run_command(fmt::format("cat '{}'", file)).output;
    CHECK(text.find("# GPU checks, ") == 0);
    CHECK(text.find("docs/gpu-validation.md") != std::string::npos);
    CHECK(count_of(text, "## a section") == 1);
    std::remove(file.c_str());
}

TEST_CASE("the hf-trainer memory check's dry run predicts its six configurations with tune", "[scripts]") {
    const auto r =
        run_command(fmt::format("python3 '{}' --tune '{}' --dry-run 2>&1", script("hf-memory-check.py"), TUNE_BINARY));
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    int lines = 0;
    std::size_t at = 0;
    for (std::size_t end = r.output.find('\n'); end != std::string::npos; at = end + 1, end = r.output.find('\n', at)) {
        const auto j = nlohmann::json::parse(r.output.substr(at, end - at));
        CHECK(j["predicted"]["allocated"].get<std::uint64_t>() <= j["predicted"]["reserved"].get<std::uint64_t>());
        CHECK(j["predicted"]["reserved"].get<std::uint64_t>() < j["predicted"]["device"].get<std::uint64_t>());
        CHECK(j["predicted"]["tokens_per_s"].get<double>() > 0);
        ++lines;
    }
    CHECK(lines == 6);
}

TEST_CASE("the peer benchmark's dry run lists PyTorch, tune, PyTorch for each configuration", "[scripts]") {
    const auto r =
        run_command(fmt::format("TUNE_BIN='{}' bash '{}' --dry-run 2>&1", TUNE_BINARY, script("gpu-peer.sh")));
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    CHECK(count_of(r.output, "would run: ") == 15);
    CHECK(count_of(r.output, "--sdpa cudnn") == 5);
    CHECK(count_of(r.output, "--sdpa flash") == 5);
    CHECK(count_of(r.output, " trial --backend cuda --json") == 5);
    // Each tune command is one `tune trial` accepts: its flags parse (the help exits before running).
    const auto first_trial = r.output.find("would run: " + std::string(TUNE_BINARY) + " trial");
    REQUIRE(first_trial != std::string::npos);
    const std::string line = r.output.substr(first_trial + 11, r.output.find('\n', first_trial) - first_trial - 11);
    const auto parsed = run_command(line + " --help > /dev/null 2>&1; echo $?");
    CHECK(parsed.output.find('0') == 0);
    // The Python side's dry run builds the configuration without torch.
    const auto dry = run_command(fmt::format(
        "python3 '{}' --model llama-7b --precision bf16 --micro-batch 2 --context 2048 --checkpointing full "
        "--sdpa cudnn --dry-run",
        script("gpu_peer.py")));
    REQUIRE(dry.exit_code == 0);
    const auto j = nlohmann::json::parse(dry.output);
    CHECK(j["config"]["num_hidden_layers"] == 32);
    CHECK(j["config"]["attn_implementation"] == "sdpa");
    const auto bad =
        run_command(fmt::format("python3 '{}' --model llama-7b --precision bf16 --micro-batch 1 "
                                "--context 64 --checkpointing none --sdpa flash --steps 2 --warmup 2 "
                                "--dry-run 2>&1",
                                script("gpu_peer.py")));
    CHECK(bad.exit_code == 2);
    CHECK_THAT(bad.output, Catch::Contains("--steps must exceed --warmup"));
}

TEST_CASE("the prepared GPU run plans the self-test, the peer run, the framework check, then offload, in 9 minutes",
          "[scripts]") {
    const auto r =
        run_command(fmt::format("TUNE_BIN='{}' bash '{}' --dry-run 2>&1", TUNE_BINARY, script("gpu-validate.sh")));
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    const auto at = [&](const char* part) { return r.output.find(fmt::format("part: {} (cap ", part)); };
    REQUIRE(at("selftest 1 GPU") != std::string::npos);
    CHECK(at("selftest 1 GPU") < at("peer benchmark"));
    CHECK(at("peer benchmark") < at("framework check"));
    CHECK(at("framework check") < at("offload trial"));
    CHECK(at("offload trial") != std::string::npos);
    CHECK_THAT(r.output, Catch::Contains("the budget is 540 s"));
}

TEST_CASE("the prepared GPU run stops a part at its cap, skips what the deadline leaves no time for, and says so",
          "[scripts]") {
    // A tune whose `devices` hangs: the 12-second budget stops it and leaves the rest no time.
    const std::string dir = fmt::format("{}/tune_gpu_validate_{}", TUNE_BUILD_DIR, ::getpid());
    const std::string fake = dir + "/tune";
    run_command(fmt::format("mkdir -p '{}'", dir));
    {
        std::ofstream out(fake);
        out << "#!/bin/sh\n[ \"$*\" = devices ] && exec sleep 60\necho '{\"devices\": []}'\n";
    }
    run_command(fmt::format("chmod +x '{}'", fake));
    const std::string results = dir + "/results.md";
    const auto r =
        run_command(fmt::format("GPU_BUDGET_S=12 GPU_RESULTS='{}' TUNE_BIN='{}' TUNE_GPU_TESTS=/bin/true "
                                "bash '{}' 2>&1",
                                results, fake, script("gpu-validate.sh")));
    INFO(r.output);
    CHECK(r.exit_code == 1);
    const std::string text = run_command(fmt::format("cat '{}'", results)).output;
    INFO(text);
    CHECK_THAT(text, Catch::Contains("| devices | FAIL: over its cap of "));  // 12 s, less what start-up took
    CHECK_THAT(text, Catch::Contains("| selftest 1 GPU | skipped: ") && Catch::Contains("of the 12 s budget left"));
    CHECK_THAT(text, Catch::Contains("| offload trial | skipped: "));
    CHECK_THAT(text, Catch::Contains("budget 12 s"));
    run_command(fmt::format("rm -rf '{}'", dir));
}

TEST_CASE("the peer benchmark runs the configurations and SDPA backends it is told to", "[scripts]") {
    const auto r = run_command(fmt::format("PEER_CONFIGS='1 3' PEER_SDPA=cudnn TUNE_BIN='{}' bash '{}' --dry-run 2>&1",
                                           TUNE_BINARY, script("gpu-peer.sh")));
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    CHECK(count_of(r.output, "would run: ") == 4);
    CHECK(count_of(r.output, "--sdpa cudnn") == 2);
    CHECK(count_of(r.output, "--sdpa flash") == 0);
    CHECK(count_of(r.output, "--model llama-7b") == 2);
    CHECK(count_of(r.output, "--model llama3.2-1b") == 2);
}
