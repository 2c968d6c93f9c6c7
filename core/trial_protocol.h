// The protocol between whoever starts `tune trial` (the sweep driver, or
// `tune trial --gpus N` relaunching itself under mpirun/srun) and the trial
// process: the argv it is started with, the result line it prints (the last
// line of stdout, one JSON TrialResult), its exit code for each status, and
// what a process that printed no result amounts to. Both starters read an
// outcome through read_child_result, so they cannot disagree on it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/noise_rule.h"

namespace tune {

// `tune trial`'s exit status for each outcome; 1 and 2 keep the CLI's meaning
// (no, bad input). Starters fall back on it when no result line arrived: a
// failing rank's line can be lost when it aborts the job, so exit 3 is oom.
inline constexpr int kTrialExitOk = 0;
inline constexpr int kTrialExitOom = 3;
inline constexpr int kTrialExitInvalid = 4;
inline constexpr int kTrialExitFailed = 5;
int trial_exit_code(TrialStatus s);

// What the child is started with, beyond its configuration.
struct TrialChildFlags {
    std::string init;                    // --init FOLDER ("" for none)
    std::string tokens;                  // --tokens FILE ("" for none)
    int threads = 0;                     // --threads N (0 for the trial's default)
    std::optional<BackendKind> backend;  // --backend (unset: the trial's default, auto)
    bool json = false;                   // --json: stdout carries only the result line
    bool force = false;                  // --force: run even when the estimate says it cannot fit
    std::string init_adapter;            // --init-adapter FOLDER (a PEFT adapter; "" for none)
    std::string save_adapter;            // --save-adapter FOLDER ("" for none)
    NoiseRule noise;                     // --max-cv X --max-steps N (when max_cv > 0)
    bool no_graphs = false;              // --no-graphs: micro-batches run eagerly on a GPU
};

// `program` (e.g. {"/path/to/tune", "trial"}) followed by --config <json> and the flags.
std::vector<std::string> trial_child_argv(std::vector<std::string> program, const TrialConfig& config,
                                          const TrialChildFlags& flags);

// The result line a trial prints (no newline), and its reading from the whole
// of stdout: the last non-blank line, nullopt when it is not a TrialResult.
std::string result_line(const TrialResult& r);
std::optional<TrialResult> parse_result_line(const std::string& stdout_text);

// How the child process ended, in the protocol's terms (the starter fills it
// from its process runner, which core does not know).
struct ChildEnd {
    bool timed_out = false;
    bool spawn_failed = false;
    int exit_code = -1;   // when it exited
    int term_signal = 0;  // when a signal ended it
    double wall_s = 0;
    std::string how;  // "exit 3", "killed by signal 9 (Killed)", ...
    std::string stderr_tail;
};

// The result of a child: its result line when there is one (a clean exit
// needed for ok, finite losses needed for ok), else the status its ending
// amounts to (timeout; exit 3 = a rank ran out of memory; anything else
// failed). The result carries `claimed`, the configuration that was started.
TrialResult read_child_result(const std::string& stdout_text, const ChildEnd& end, const TrialConfig& claimed);

}  // namespace tune
