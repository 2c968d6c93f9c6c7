#include "driver/progress.h"

#include <unistd.h>

#include <algorithm>

#include <fmt/format.h>

#include "core/units.h"

namespace tune {

SweepProgress::SweepProgress(bool progress_line, bool json_events, std::FILE* line_out, std::FILE* event_out)
    : line_(progress_line && ::isatty(::fileno(line_out))),
      plain_(progress_line && !line_ && !json_events),
      json_(json_events),
      line_out_(line_out),
      event_out_(event_out) {}

void SweepProgress::emit(nlohmann::json event) {
    if (!json_) return;
    event["elapsed_s"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    fmt::print(event_out_, "{}\n", event.dump());
    std::fflush(event_out_);
}

void SweepProgress::start(const std::string& sweep, std::uint64_t to_run, const StatusCounts& counts) {
    to_run_ = to_run;
    counts_ = counts;
    start_ = std::chrono::steady_clock::now();
    nlohmann::json c = nlohmann::json::object();
    for (TrialStatus s : kStatuses) c[std::string(to_string(s))] = counts[static_cast<std::size_t>(s)];
    emit({{"event", "start"}, {"sweep", sweep}, {"to_run", to_run}, {"counts", c}});
}

std::optional<double> SweepProgress::mean_trial_s() const {
    if (done_ == 0) return std::nullopt;
    return trial_seconds_ / static_cast<double>(done_);
}

void SweepProgress::set_concurrency(std::uint32_t trials_at_once) { concurrency_ = std::max(1u, trials_at_once); }

std::optional<double> SweepProgress::eta_s(std::uint64_t remaining) const {
    auto mean = mean_trial_s();
    if (!mean) return std::nullopt;
    // Remaining trials run `concurrency_` at a time, in whole rounds.
    const std::uint64_t rounds = (remaining + concurrency_ - 1) / concurrency_;
    return *mean * static_cast<double>(rounds);
}

std::string SweepProgress::counts_text() const {
    auto n = [&](TrialStatus s) { return counts_[static_cast<std::size_t>(s)]; };
    return fmt::format("[{}/{}] ok {} oom {} failed {} timeout {} pruned {}", done_, to_run_, n(TrialStatus::ok),
                       n(TrialStatus::oom), n(TrialStatus::failed), n(TrialStatus::timeout), n(TrialStatus::pruned));
}

std::string SweepProgress::eta_text() const {
    const auto eta = remaining_s_ ? remaining_s_ : eta_s(to_run_ > done_ ? to_run_ - done_ : 0);
    return eta ? format_duration(*eta) : std::string("?");
}

void SweepProgress::draw_line(const std::string& current) {
    if (!line_) return;
    fmt::print(line_out_, "\r\033[K{} | {} | ETA {}", counts_text(), current, eta_text());
    std::fflush(line_out_);
}

void SweepProgress::trial_started(std::int64_t id, const std::string& summary) {
    draw_line("running " + summary);
    emit({{"event", "trial_started"}, {"id", id}, {"config", summary}});
}

void SweepProgress::trial_finished(std::int64_t id, const TrialResult& r, double wall_s) {
    ++done_;
    trial_seconds_ += wall_s;
    counts_[static_cast<std::size_t>(r.status)]++;
    draw_line(fmt::format("{} {}", summary(r.config), to_string(r.status)));
    if (plain_) {
        // A log line stands alone: which trial, how it ended, where the sweep is.
        const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
        fmt::print(line_out_, "{} | trial {} {} {} in {} | elapsed {} | ETA {}\n", counts_text(), id, summary(r.config),
                   to_string(r.status), format_duration(wall_s), format_duration(elapsed), eta_text());
        std::fflush(line_out_);
    }
    emit({{"event", "trial_finished"},
          {"id", id},
          {"status", to_string(r.status)},
          {"reason", r.reason},
          {"config", summary(r.config)},
          {"peak_bytes", r.memory.peak},
          {"tokens_per_s", r.tokens_per_s},
          {"wall_s", wall_s},
          {"remaining_s", remaining_s_ ? nlohmann::json(*remaining_s_) : nlohmann::json()}});
}

void SweepProgress::note(const std::string& message) {
    if (line_)
        fmt::print(line_out_, "\r\033[K{}\n", message);
    else if (!json_)
        fmt::print(line_out_, "{}\n", message);
    emit({{"event", "note"}, {"message", message}});
}

void SweepProgress::finish() {
    if (line_) fmt::print(line_out_, "\r\033[K");
    emit({{"event", "finished"}, {"trials_run", done_}});
}

}  // namespace tune
