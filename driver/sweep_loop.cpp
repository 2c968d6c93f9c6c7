#include "driver/sweep_loop.h"

#include <chrono>
#include <map>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "driver/calibration.h"
#include "driver/makespan.h"
#include "driver/plan.h"
#include "driver/progress.h"
#include "driver/trial_child.h"
#include "driver/trial_cost.h"
#include "driver/trial_runner.h"
#include "estimate/estimate.h"
#include "launch/process.h"

namespace tune {
namespace {

StatusCounts counts_of(const Store& store, SweepId id) {
    for (const SweepSummary& s : store.sweeps())
        if (s.id == id) return s.counts;
    return {};
}

class SweepLoop {
public:
    SweepLoop(const SweepSpec& spec, const SweepOptions& options, const SlotLayout& layout, Store& store, SweepId sweep,
              SweepReport& report)
        : spec_(spec),
          options_(options),
          layout_(layout),
          store_(store),
          sweep_(sweep),
          report_(report),
          base_(base_estimate_options(spec)),
          calibration_(base_, options.prune_tolerance, prior_overhead_slope(spec.hardware.backend)),
          planned_with_(calibration_),
          progress_(options.progress_line, options.json_events),
          runner_(layout.slots.size()),
          cost_(spec) {}

    void run() {
        const StatusCounts start = counts_of(store_, sweep_);
        std::uint64_t to_run = start[static_cast<std::size_t>(TrialStatus::pending)];
        if (options_.max_trials) to_run = std::min<std::uint64_t>(to_run, *options_.max_trials);
        progress_.start(spec_.name, to_run, start);
        load_pending();
        progress_.set_concurrency(static_cast<std::uint32_t>(layout_.slots.size()));
        if (layout_.slots.size() > 1) progress_.note("trials run " + layout_.description);
        began_ = std::chrono::steady_clock::now();
        try {
            run_until_done();
        } catch (const StoreError&) {
            give_back_unrecorded();
            throw;
        }
        progress_.finish();
        report_.calibrated_trials = calibration_.observations();
        report_.efficiency_factor = calibration_.efficiency_factor();
        report_.pace_exponent = calibration_.pace_exponent();
        report_.pace_prior = calibration_.pace_prior();
        report_.size_exponent = calibration_.size_exponent();
        report_.memory_errors = calibration_.memory_errors();
    }

private:
    void run_until_done() {
        bool exhausted = false;
        for (;;) {
            watch_interrupts();
            while (!exhausted && runner_.free_slot() && !stop_before_next()) {
                auto claimed = store_.claim_next_pending(sweep_, ClaimOrder::priority);
                if (!claimed)
                    exhausted = true;
                else
                    launch(*runner_.free_slot(), std::move(*claimed));
            }
            if (runner_.in_flight() == 0) break;
            if (auto done = runner_.wait_next(0.2)) record(*done);
        }
    }

    // The store failed under the sweep (a full disk, most often): the trials it claimed and has
    // not recorded stop and go back to pending without the attempt their claim counted, so a
    // sweep that keeps hitting a full disk never abandons them. The rows this writes fit where the
    // failed transaction's log pages were; when even they cannot be written, the trials stay
    // running and the next driver counts them as it counts a dead driver's.
    void give_back_unrecorded() {
        runner_.cancel_all();
        while (runner_.in_flight() > 0) runner_.wait_next(0.2);
        if (unrecorded_.empty()) return;
        const std::vector<TrialId> ids(unrecorded_.begin(), unrecorded_.end());
        try {
            store_.release(ids,
                           "not recorded: the database could not be written; it runs again when the sweep "
                           "resumes");
        } catch (const StoreError& e) {
            progress_.note(fmt::format("{} trial(s) stay marked running: the database refused even that ({})",
                                       ids.size(), e.what()));
        }
    }

    // The first Ctrl-C stops new starts and lets running trials finish; the second stops them.
    void watch_interrupts() {
        const int n = interrupts_.poll();
        if (n >= 1 && !stopping_noted_) {
            stopping_noted_ = true;
            if (runner_.in_flight() > 0)
                progress_.note(
                    fmt::format("Ctrl-C, SIGTERM or SIGHUP: finishing the {} running trial(s), then stopping "
                                "(again to stop them now)",
                                runner_.in_flight()));
        }
        if (n >= 2) runner_.cancel_all();
    }

    // Slurm cancels a job's steps (requeue, time limit, scancel) a moment before its SIGTERM reaches
    // this process: a step that failed may be such a cancellation, so the signal gets time to arrive.
    void await_stop_signal() {
        for (int i = 0; i < 20 && interrupts_.poll() == 0; ++i)
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }

    bool stop_before_next() {
        if (interrupts_.count() > 0) {
            report_.interrupted = true;
            return true;
        }
        if (options_.max_trials && started_ >= *options_.max_trials) {
            report_.max_trials_reached = true;
            return true;
        }
        if (spec_.budget_s) {
            const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - began_).count();
            if (elapsed + progress_.mean_trial_s().value_or(0.0) > *spec_.budget_s) {
                report_.budget_reached = true;
                return true;
            }
        }
        return false;
    }

    void launch(std::size_t slot, ClaimedTrial claimed) {
        pending_.erase(claimed.id);
        unrecorded_.insert(claimed.id);
        progress_.trial_started(claimed.id, summary(claimed.config));
        const StepCommand step = trial_step(claimed.config, spec_, trial_program(), layout_, slot);
        ProcessSpec process;
        process.argv = step.argv;
        process.env = step.env;
        process.cpu_affinity = step.cpu_affinity;
        process.timeout_s = spec_.trial.timeout_s;
        ++started_;
        runner_.start(slot, std::move(claimed), std::move(process));
    }

    void record(const FinishedTrial& done) {
        const TrialResult result = interpret_outcome(done.outcome, done.claimed.config, done.claimed.estimate);
        if (result.status == TrialStatus::failed && layout_.launcher == Launcher::srun) await_stop_signal();
        // Stopped by us, or failed after SIGINT/SIGTERM reached the sweep (Slurm cancelling the job's
        // steps at a requeue or the time limit): not a result of the configuration, so it runs again.
        const bool cut_short =
            done.outcome.interrupted || (interrupts_.count() > 0 && result.status == TrialStatus::failed);
        if (cut_short) {
            store_.release(done.claimed.id, "interrupted; it runs again when the sweep resumes");
            unrecorded_.erase(done.claimed.id);
            report_.interrupted = true;
            progress_.note("interrupted: a running trial was stopped and will run again on resume");
            return;
        }
        store_.record_result(done.claimed.id, result, done.outcome.stderr_tail, done.started, done.ended);
        unrecorded_.erase(done.claimed.id);
        ++report_.trials_run;
        cost_.observe(done.outcome.wall_s, result);
        learn(result);
        progress_.set_remaining_s(remaining_s());
        progress_.trial_finished(done.claimed.id, result, done.outcome.wall_s);
    }

    // The pending trials' time, packed onto the slots, at the fixed cost learned so far and the
    // step times as last re-estimated: the ETA the progress shows.
    double remaining_s() const {
        std::vector<NewTrial> pending;
        pending.reserve(pending_.size());
        for (const auto& [id, t] : pending_) pending.push_back(t);
        const auto slots = static_cast<std::uint32_t>(layout_.slots.size());
        return predict_makespan(pending, cost_, slots, layout_.nodes).makespan_s;
    }

    // The pending trials' estimates as the store holds them: read at the start and after each
    // re-plan, not per finished trial; a trial leaves when it is claimed.
    void load_pending() {
        pending_.clear();
        for (TrialRecord& t : store_.trials({sweep_, TrialStatus::pending, false, false}))
            pending_.emplace(t.id, NewTrial{std::move(t.result.config),
                                            TrialStatus::pending,
                                            {},
                                            std::move(t.result.estimate),
                                            t.priority,
                                            {}});
    }

    void learn(const TrialResult& result) {
        if (result.status != TrialStatus::ok) return;
        calibration_.observe(result, estimate(spec_.model, result.config, spec_.hardware, base_));
        // Re-plan only when the model of the device moved enough to change decisions.
        if (!calibration_.moved_since(planned_with_)) return;
        PlanSettings settings{calibration_.options(), calibration_.prune_tolerance(), strategy()};
        const auto pending = store_.trials({sweep_, TrialStatus::pending, false, false});
        store_.update_pending(replan_pending(spec_, pending, settings));
        planned_with_ = calibration_;
        load_pending();
    }

    std::vector<std::string> trial_program() const {
        if (!options_.trial_program.empty()) return options_.trial_program;
        return {self_executable(), "trial"};
    }
    SearchStrategy strategy() const { return options_.strategy.value_or(spec_.strategy); }

    const SweepSpec& spec_;
    const SweepOptions& options_;
    const SlotLayout& layout_;
    Store& store_;
    SweepId sweep_;
    SweepReport& report_;
    EstimateOptions base_;
    Calibration calibration_;
    Calibration planned_with_;
    SweepProgress progress_;
    // Before the runner: its threads inherit the mask that blocks SIGINT/SIGTERM, so the
    // signals reach this watcher, and the runner (destroyed first) ends its trials before.
    InterruptWatcher interrupts_;
    TrialRunner runner_;
    TrialCost cost_;  // a trial's fixed cost, learned as trials finish
    std::map<TrialId, NewTrial> pending_;
    std::set<TrialId> unrecorded_;  // claimed, and neither recorded nor released yet
    std::chrono::steady_clock::time_point began_;
    std::uint64_t started_ = 0;
    bool stopping_noted_ = false;
};

}  // namespace

void run_trials(const SweepSpec& spec, const SweepOptions& options, const SlotLayout& layout, Store& store,
                SweepId sweep, SweepReport& report) {
    SweepLoop(spec, options, layout, store, sweep, report).run();
}

}  // namespace tune
