// `tune status`: how far a sweep has got, read from its database, also while
// another process (a Slurm job, say) is running it: counts per status, the
// trials running now and for how long, elapsed time and an ETA from the
// trials measured so far.
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "cli/commands.h"
#include "core/units.h"
#include "driver/lease.h"
#include "launch/host_name.h"
#include "reports/text_table.h"
#include "store/store.h"

namespace tune::cli {
namespace {

struct StatusOptions {
    std::string db = "tune.db";
    std::string sweep;  // empty: every sweep in the database
};

double seconds_between(Timestamp a, Timestamp b) { return std::chrono::duration<double>(b - a).count(); }

struct Timing {
    double finished_s = 0;  // summed wall time of the trials that ended
    std::uint64_t finished = 0;
    std::optional<Timestamp> first_start, last_end;
};

Timing timing_of(const std::vector<TrialRecord>& trials) {
    Timing t;
    for (const TrialRecord& r : trials) {
        if (r.started_at && (!t.first_start || *r.started_at < *t.first_start)) t.first_start = r.started_at;
        if (!r.started_at || !r.ended_at || r.result.status == TrialStatus::running) continue;
        t.finished_s += seconds_between(*r.started_at, *r.ended_at);
        ++t.finished;
        if (!t.last_end || *r.ended_at > *t.last_end) t.last_end = r.ended_at;
    }
    return t;
}

// Whether the trials shown as running still have a driver: a sweep whose driver is gone
// (killed, its node lost) keeps them "running" until it resumes.
void print_driver(const Store& store, const std::string& sweep, Timestamp now) {
    const auto lease = store.lease(sweep);
    const std::string again = "its running trials run again when the sweep resumes (tune sweep FILE)";
    if (!lease) {
        fmt::print("  driver: none holds the sweep; {}\n", again);
        return;
    }
    const std::string host = printable(lease->host);  // from the database
    if (const auto lapse = lease_lapse(*lease, host_name(), now))
        fmt::print("  driver: gone (pid {} on host {}: {}); {}\n", lease->pid, host, *lapse, again);
    else
        fmt::print("  driver: pid {} on host {}, heartbeat {} s ago\n", lease->pid, host,
                   std::max<std::int64_t>(
                       0, std::chrono::duration_cast<std::chrono::seconds>(now - lease->heartbeat).count()));
}

void print_sweep(const Store& store, const SweepSummary& s) {
    const auto trials = store.trials({s.id, std::nullopt, false, false});
    const Timing t = timing_of(trials);
    const std::uint64_t running = s.count(TrialStatus::running), pending = s.count(TrialStatus::pending);
    const std::uint64_t done = s.total() - running - pending;
    fmt::print("{}: {}/{} done | ok {} oom {} failed {} timeout {} pruned {} invalid {} | running {} pending {}\n",
               printable(s.record.name), done, s.total(), s.count(TrialStatus::ok), s.count(TrialStatus::oom),
               s.count(TrialStatus::failed), s.count(TrialStatus::timeout), s.count(TrialStatus::pruned),
               s.count(TrialStatus::invalid), running, pending);
    const Timestamp now = now_timestamp();
    if (t.first_start) {
        const Timestamp until = running > 0 || !t.last_end ? now : *t.last_end;
        std::string eta = "?";
        if (pending + running == 0)
            eta = "done";
        else if (t.finished > 0)
            // The trials running now show how many run at once.
            eta = format_duration(t.finished_s / static_cast<double>(t.finished) *
                                  std::ceil(static_cast<double>(pending + running) /
                                            static_cast<double>(std::max<std::uint64_t>(running, 1))));
        fmt::print("  elapsed {} | ETA {}\n", format_duration(seconds_between(*t.first_start, until)), eta);
    }
    for (const TrialRecord& r : trials) {
        if (r.result.status != TrialStatus::running) continue;
        fmt::print("  running: trial {} {} for {} (attempt {})\n", r.id, summary(r.result.config),
                   r.started_at ? format_duration(seconds_between(*r.started_at, now)) : std::string("?"), r.attempts);
    }
    if (running > 0) print_driver(store, s.record.name, now);
}

int run_status(const StatusOptions& o) {
    const Store store = Store::open_reader(o.db);
    auto sweeps = store.sweeps();
    if (!o.sweep.empty()) std::erase_if(sweeps, [&](const SweepSummary& s) { return s.record.name != o.sweep; });
    if (sweeps.empty()) {
        fmt::print("{} holds no sweep{}.\n", printable(o.db),
                   o.sweep.empty() ? std::string(" yet") : " named " + printable(o.sweep));
        return o.sweep.empty() ? kExitOk : kExitNo;
    }
    for (const SweepSummary& s : sweeps) print_sweep(store, s);
    return kExitOk;
}

}  // namespace

void add_status_command(CLI::App& app, int& exit_code) {
    auto* cmd = app.add_subcommand(
        "status",
        "How far each sweep in a results database has got: counts per status, the trials running now,\n"
        "elapsed time and an ETA. Reads the database only, so it works while another process (a Slurm\n"
        "job from `tune submit`) runs the sweep: `tune status --db tune.db`.");
    auto o = std::make_shared<StatusOptions>();
    cmd->add_option("--db", o->db, "Results database (default: tune.db)");
    cmd->add_option("--sweep", o->sweep, "Only this sweep (by name)");
    cmd->callback([&exit_code, o] { exit_code = run_status(*o); });
}

}  // namespace tune::cli
