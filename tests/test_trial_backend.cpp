// `tune trial --backend`: the CPU unless a CUDA device is visible (auto), and
// a clear failure when CUDA is asked for and there is none.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "kernels/device_query.h"
#include "support/run_command.h"

using tune::test::run_command;

namespace {
// stdout only: the JSON result is its last line.
tune::test::CommandResult trial(const std::string& args) {
    return run_command(std::string(TUNE_BINARY) + " " + args + " 2>/dev/null");
}
}  // namespace

namespace {
nlohmann::json last_line(const std::string& out) {
    const auto end = out.find_last_not_of('\n');
    const auto start = out.rfind('\n', end);
    return nlohmann::json::parse(out.substr(start == std::string::npos ? 0 : start + 1));
}
}  // namespace

TEST_CASE("tune trial picks its backend at run time", "[trial][backend]") {
    const bool gpu = !tune::query_devices().devices.empty();
    const std::string base = "trial --model tiny --steps 2 --warmup 1 --context 32 --json ";
    auto cpu = trial(base + "--backend cpu");
    REQUIRE(cpu.exit_code == 0);
    CHECK(last_line(cpu.output)["status"] == "ok");
    if (gpu) return;  // on a GPU machine auto and cuda run there; tests/gpu covers that

    auto autodetect = trial(base);
    REQUIRE(autodetect.exit_code == 0);
    // The same CPU run: the tagged components agree; the overhead (the process's
    // measured baseline) and so the peak differ by a few pages between processes.
    const auto tagged = [](nlohmann::json m) {
        m.erase("overhead");
        m.erase("peak");
        return m;
    };
    CHECK(tagged(last_line(autodetect.output)["memory"]) == tagged(last_line(cpu.output)["memory"]));

    auto cuda = trial(base + "--backend cuda");
    CHECK(cuda.exit_code == 5);
    const auto r = last_line(cuda.output);
    CHECK(r["status"] == "failed");
    CHECK_THAT(r["reason"].get<std::string>(), Catch::Contains("--backend cuda, but no CUDA device is visible"));
    CHECK(trial(base + "--backend tpu").exit_code == 2);
}
