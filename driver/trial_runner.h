// Trials running at once as child processes. Each has a thread that only waits
// on its process (launch/process); the outcomes come back to the driver's
// thread, the only one that touches the store.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "launch/process.h"
#include "store/records.h"

namespace tune {

struct FinishedTrial {
    ClaimedTrial claimed;
    ProcessOutcome outcome;
    Timestamp started;
    Timestamp ended;
    std::size_t slot = 0;
};

class TrialRunner {
public:
    explicit TrialRunner(std::size_t slots);
    ~TrialRunner();  // stops what still runs and waits for it
    TrialRunner(const TrialRunner&) = delete;
    TrialRunner& operator=(const TrialRunner&) = delete;

    // A free slot, or nullopt when every slot runs a trial.
    std::optional<std::size_t> free_slot() const;
    // Starts `process` for `claimed` in `slot` (which must be free).
    void start(std::size_t slot, ClaimedTrial claimed, ProcessSpec process);
    // The next finished trial, waiting at most `timeout_s`; its slot is free again.
    std::optional<FinishedTrial> wait_next(double timeout_s);
    std::size_t in_flight() const;
    // Ends every running trial (they come back with outcome.interrupted).
    void cancel_all() { cancel_ = true; }

private:
    std::vector<std::thread> threads_;  // by slot; joinable while its trial runs or is unclaimed
    std::vector<bool> busy_;
    std::atomic<bool> cancel_{false};
    mutable std::mutex mutex_;
    std::condition_variable finished_cv_;
    std::deque<FinishedTrial> finished_;
};

}  // namespace tune
