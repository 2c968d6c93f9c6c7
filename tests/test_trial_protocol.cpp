// The protocol with the `tune trial` child (core/trial_protocol.h), which the
// sweep driver and `tune trial --gpus N` both read outcomes with.
#include <catch2/catch.hpp>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "core/trial_protocol.h"

using namespace tune;

namespace {

TrialConfig claimed() {
    TrialConfig c;
    c.model.name = "tiny";
    c.optimizer = Optimizer::lion;
    return c;
}

ChildEnd exited(int code) {
    ChildEnd e;
    e.exit_code = code;
    e.how = "exit " + std::to_string(code);
    return e;
}

}  // namespace

TEST_CASE("exit codes per status", "[protocol]") {
    CHECK(trial_exit_code(TrialStatus::ok) == 0);
    CHECK(trial_exit_code(TrialStatus::oom) == kTrialExitOom);
    CHECK(trial_exit_code(TrialStatus::invalid) == kTrialExitInvalid);
    CHECK(trial_exit_code(TrialStatus::failed) == kTrialExitFailed);
    CHECK(trial_exit_code(TrialStatus::timeout) == kTrialExitFailed);
}

TEST_CASE("the child's argv carries the config and only the flags given", "[protocol]") {
    const TrialConfig c = claimed();
    const auto plain = trial_child_argv({"tune", "trial"}, c, TrialChildFlags{});
    REQUIRE(plain.size() == 4);
    CHECK(plain[2] == "--config");
    CHECK(nlohmann::json::parse(plain[3]).get<TrialConfig>() == c);

    TrialChildFlags f;
    f.json = true;
    f.threads = 3;
    f.backend = BackendKind::automatic;
    f.force = true;
    f.init = "/m";
    f.init_adapter = "/adapter-in";
    f.save_adapter = "/adapter-out";
    f.no_graphs = true;
    const auto all = trial_child_argv({"tune", "trial"}, c, f);
    auto has_in = [](const std::vector<std::string>& argv, const std::string& a) {
        return std::find(argv.begin(), argv.end(), a) != argv.end();
    };
    auto has = [&](const std::string& a) { return std::find(all.begin(), all.end(), a) != all.end(); };
    CHECK(has("--json"));
    CHECK(has("--force"));
    CHECK(has("--no-graphs"));  // every rank runs eagerly when asked to
    CHECK_FALSE(has_in(plain, "--no-graphs"));
    CHECK(has("--init"));
    CHECK_FALSE(has("--tokens"));
    // `tune trial --gpus N` relaunches itself: every rank needs the adapter folders too.
    CHECK(has("--init-adapter"));
    CHECK(has("/adapter-in"));
    CHECK(has("--save-adapter"));
    CHECK(has("/adapter-out"));
    CHECK_FALSE(has_in(plain, "--init-adapter"));
    const auto threads = std::find(all.begin(), all.end(), "--threads");
    REQUIRE(threads != all.end());
    CHECK(*(threads + 1) == "3");
    const auto backend = std::find(all.begin(), all.end(), "--backend");
    REQUIRE(backend != all.end());
    CHECK(*(backend + 1) == "auto");
}

TEST_CASE("the result is the last non-blank stdout line", "[protocol]") {
    TrialResult r;
    r.status = TrialStatus::ok;
    r.losses = {2.0, 1.5};
    const std::string out = "noise\n" + result_line(r) + "\n\n";
    const TrialResult read = read_child_result(out, exited(0), claimed());
    CHECK(read.status == TrialStatus::ok);
    CHECK(read.config == claimed());
    CHECK_FALSE(parse_result_line("not json\n"));
    CHECK_FALSE(parse_result_line(""));
}

TEST_CASE("a missing result: timeout, exit 3 as oom, anything else failed", "[protocol]") {
    ChildEnd timeout;
    timeout.timed_out = true;
    CHECK(read_child_result("", timeout, claimed()).status == TrialStatus::timeout);

    ChildEnd oom = exited(kTrialExitOom);
    oom.stderr_tail = "trial oom: rank 1 of 2: out of memory\n";
    const TrialResult lost = read_child_result("", oom, claimed());
    CHECK(lost.status == TrialStatus::oom);
    CHECK_THAT(lost.reason, Catch::Contains("rank 1 of 2"));

    ChildEnd killed;
    killed.term_signal = 9;
    killed.how = "killed by signal 9";
    CHECK(read_child_result("", killed, claimed()).status == TrialStatus::failed);
    CHECK_THAT(read_child_result("", exited(7), claimed()).reason, Catch::Contains("without a result"));
}

TEST_CASE("an ok result is not ok after a bad exit", "[protocol]") {
    TrialResult r;
    r.status = TrialStatus::ok;
    CHECK(read_child_result(result_line(r), exited(5), claimed()).status == TrialStatus::failed);
    r.losses = {1.0};
    CHECK(read_child_result(result_line(r), exited(0), claimed()).status == TrialStatus::ok);
}
