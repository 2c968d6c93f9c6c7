#include "driver/trial_runner.h"

#include <chrono>

#include "store/timestamp.h"

namespace tune {

TrialRunner::TrialRunner(std::size_t slots) : threads_(slots), busy_(slots, false) {}

TrialRunner::~TrialRunner() {
    cancel_ = true;
    for (auto& t : threads_)
        if (t.joinable()) t.join();
}

std::optional<std::size_t> TrialRunner::free_slot() const {
    for (std::size_t i = 0; i < busy_.size(); ++i)
        if (!busy_[i]) return i;
    return std::nullopt;
}

std::size_t TrialRunner::in_flight() const {
    std::size_t n = 0;
    for (bool b : busy_) n += b ? 1 : 0;
    return n;
}

void TrialRunner::start(std::size_t slot, ClaimedTrial claimed, ProcessSpec process) {
    busy_[slot] = true;
    process.cancel = &cancel_;
    process.interrupts = nullptr;  // the driver's thread reads interrupts and cancels
    threads_[slot] = std::thread([this, slot, claimed = std::move(claimed), process = std::move(process)]() mutable {
        FinishedTrial done;
        done.slot = slot;
        done.started = now_timestamp();
        try {
            done.outcome = run_process(process);
        } catch (const std::exception& e) {
            // fork or pipe failed: the trial never started, which the protocol reads as a spawn failure
            done.outcome.spawn_failed = true;
            done.outcome.exit_code = 127;
            done.outcome.stderr_tail = e.what();
        }
        done.ended = now_timestamp();
        done.claimed = std::move(claimed);
        const std::lock_guard lock(mutex_);
        finished_.push_back(std::move(done));
        finished_cv_.notify_one();
    });
}

std::optional<FinishedTrial> TrialRunner::wait_next(double timeout_s) {
    std::unique_lock lock(mutex_);
    finished_cv_.wait_for(lock, std::chrono::duration<double>(timeout_s), [&] { return !finished_.empty(); });
    if (finished_.empty()) return std::nullopt;
    FinishedTrial done = std::move(finished_.front());
    finished_.pop_front();
    lock.unlock();
    threads_[done.slot].join();
    busy_[done.slot] = false;
    return done;
}

}  // namespace tune
