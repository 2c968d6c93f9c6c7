// What a running sweep tells the person (or script) watching: on a terminal a
// progress line on stderr with counts, the current trial and an ETA from
// measured trial times; off a terminal (Slurm logs, CI) one plain line per
// finished trial with the same counts, elapsed time and ETA; with --json one
// JSON event per line on stdout.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "store/records.h"

namespace tune {

class SweepProgress {
public:
    SweepProgress(bool progress_line, bool json_events, std::FILE* line_out = stderr, std::FILE* event_out = stdout);

    // `to_run` is how many trials this invocation may still run (pending at the start).
    void start(const std::string& sweep, std::uint64_t to_run, const StatusCounts& counts);
    void trial_started(std::int64_t id, const std::string& summary);
    void trial_finished(std::int64_t id, const TrialResult& result, double wall_s);
    void note(const std::string& message);  // a line for the human (and an event)
    void finish();
    // Trials that run at once: the ETA divides the remaining work among them.
    void set_concurrency(std::uint32_t trials_at_once);

    // Mean wall time of the trials run so far, nullopt before the first.
    std::optional<double> mean_trial_s() const;
    // ETA for `remaining` trials from measured trial times.
    std::optional<double> eta_s(std::uint64_t remaining) const;
    // The sweep's own prediction of what is left (driver/trial_cost over the pending trials'
    // estimates), which the ETA shows from now on instead of the mean trial time.
    void set_remaining_s(double seconds) { remaining_s_ = seconds; }

private:
    void draw_line(const std::string& current);
    std::string counts_text() const;
    std::string eta_text() const;
    void emit(nlohmann::json event);

    bool line_;   // a redrawn line: stderr is a terminal
    bool plain_;  // one line per finished trial: progress wanted, no terminal, no --json
    bool json_;
    std::FILE* line_out_;
    std::FILE* event_out_;
    std::uint64_t to_run_ = 0;
    std::uint64_t done_ = 0;
    std::uint32_t concurrency_ = 1;
    double trial_seconds_ = 0;
    std::optional<double> remaining_s_;
    StatusCounts counts_{};
    std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace tune
