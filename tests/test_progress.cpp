// The sweep's progress output off a terminal: a log (Slurm, CI) gets one line
// per finished trial with the counts, elapsed time and ETA, and nothing that
// redraws a line.
#include <catch2/catch.hpp>

#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "driver/progress.h"

using namespace tune;

namespace {

std::string read_all(std::FILE* f) {
    std::fflush(f);
    std::rewind(f);
    std::string text;
    char buffer[4096];
    while (std::size_t n = std::fread(buffer, 1, sizeof(buffer), f)) text.append(buffer, n);
    return text;
}

std::vector<std::string> lines_of(const std::string& text) {
    std::vector<std::string> lines;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
}

TrialResult result_with(TrialStatus status) {
    TrialResult r;
    r.status = status;
    return r;
}

}  // namespace

TEST_CASE("off a terminal, every finished trial is one line with counts, elapsed time and ETA", "[progress]") {
    std::FILE* log = std::tmpfile();
    REQUIRE(log);
    {
        SweepProgress progress(true, false, log, log);
        progress.start("s", 4, StatusCounts{});
        progress.set_concurrency(2);
        progress.trial_started(1, "first");
        progress.trial_finished(1, result_with(TrialStatus::ok), 10.0);
        progress.trial_started(2, "second");
        progress.trial_finished(2, result_with(TrialStatus::oom), 10.0);
        // Two left at two at a time: one more round of the 10 s mean.
        CHECK(progress.eta_s(2) == Approx(10.0));
        progress.finish();
    }
    const auto lines = lines_of(read_all(log));
    std::fclose(log);
    REQUIRE(lines.size() == 2);
    CHECK_THAT(lines[0], Catch::StartsWith("[1/4] ok 1 oom 0"));
    CHECK_THAT(lines[1], Catch::StartsWith("[2/4] ok 1 oom 1"));
    for (const auto& line : lines) {
        CHECK_THAT(line, Catch::Contains("elapsed"));
        CHECK_THAT(line, Catch::Contains("ETA"));
        CHECK(line.find('\r') == std::string::npos);  // no terminal redraws in a log
    }
    CHECK_THAT(lines[1], Catch::Contains("oom"));
}

TEST_CASE("with --json the log gets events only, no plain lines", "[progress]") {
    std::FILE* events = std::tmpfile();
    std::FILE* log = std::tmpfile();
    {
        SweepProgress progress(false, true, log, events);
        progress.start("s", 1, StatusCounts{});
        progress.trial_finished(1, result_with(TrialStatus::ok), 1.0);
        progress.finish();
    }
    CHECK(read_all(log).empty());
    CHECK(lines_of(read_all(events)).size() == 3);  // start, trial_finished, finished
    std::fclose(events);
    std::fclose(log);
}

TEST_CASE("the ETA is the sweep's own prediction of what is left once it has one", "[progress][makespan]") {
    std::FILE* log = std::tmpfile();
    REQUIRE(log);
    {
        SweepProgress progress(true, false, log, log);
        progress.start("s", 3, StatusCounts{});
        progress.trial_finished(1, result_with(TrialStatus::ok), 10.0);
        progress.set_remaining_s(125.0);  // 2m 05s
        progress.trial_finished(2, result_with(TrialStatus::ok), 10.0);
        progress.finish();
    }
    const auto lines = lines_of(read_all(log));
    std::fclose(log);
    REQUIRE(lines.size() == 2);
    CHECK_THAT(lines[0], Catch::EndsWith("ETA 20s"));     // the mean of measured trials, two left
    CHECK_THAT(lines[1], Catch::EndsWith("ETA 2m 05s"));  // the prediction
}
