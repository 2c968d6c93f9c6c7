// Runs one child process (a trial, or mpirun/srun of one) with a timeout,
// capturing its stdout and the tail of its stderr, and ending every process
// it started (its session: MPI ranks in their own process groups, orphans
// included) when it must stop or once it has exited. The sweep driver's isolation rests on
// this: whatever the child does (crash, hang, OOM), the parent gets an outcome.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tune {

// Turns SIGINT, SIGTERM and SIGHUP into readable events instead of asynchronous
// handlers (signalfd), so the driver decides what an interrupt means: the
// first lets the running trial finish, the second stops it. While a watcher
// exists the signals are blocked in this process; children get them unblocked.
class InterruptWatcher {
public:
    InterruptWatcher();
    ~InterruptWatcher();
    InterruptWatcher(const InterruptWatcher&) = delete;
    InterruptWatcher& operator=(const InterruptWatcher&) = delete;

    int fd() const { return fd_; }
    // Reads pending signals; returns how many interrupts have arrived in total.
    int poll();
    int count() const { return count_; }

private:
    int fd_ = -1;
    int count_ = 0;
    std::uint64_t saved_mask_[16] = {};  // sigset_t storage, restored on destruction
};

struct ProcessSpec {
    std::vector<std::string> argv;                         // argv[0] is looked up on PATH
    std::vector<std::pair<std::string, std::string>> env;  // added to the parent's environment
    double timeout_s = 0;                                  // 0: no limit
    std::size_t stderr_tail_bytes = 16 * 1024;
    std::size_t stdout_limit_bytes = 4 * 1024 * 1024;  // beyond it, the oldest output is dropped
    InterruptWatcher* interrupts = nullptr;            // optional
    int kill_at_interrupt = 2;                         // the interrupt count that stops the child
    const std::atomic<bool>* cancel = nullptr;         // set: stop the child as if interrupted
    std::vector<int> cpu_affinity;                     // cores the child may run on; empty: inherit
};

struct ProcessOutcome {
    int exit_code = -1;         // when it exited
    int term_signal = 0;        // when a signal ended it
    bool timed_out = false;     // we ended it at the timeout
    bool interrupted = false;   // we ended it because of an interrupt
    bool spawn_failed = false;  // it never started (the reason is in stderr_tail)
    std::string stdout_text;
    std::string stderr_tail;
    double wall_s = 0;

    // "exit 3", "signal 6 (Aborted)", "timeout after 60s", ...
    std::string describe() const;
};

// Safe to call from several threads at once (the driver runs concurrent trials so).
ProcessOutcome run_process(const ProcessSpec& spec);

}  // namespace tune
