// Times one optimizer step to the moment the device has finished it. On a GPU
// the trainer's step() returns with the update still queued on the stream, so
// stopping the clock there would time the host's launches, not the step.
#pragma once

#include <chrono>
#include <utility>

namespace tune::train {

// Runs `step()`, then `wait_for_device()`, and sets `ms` to the wall time of both.
template <class Step, class WaitForDevice>
auto time_step_to_completion(Step&& step, WaitForDevice&& wait_for_device, double& ms) {
    const auto start = std::chrono::steady_clock::now();
    auto stats = std::forward<Step>(step)();
    std::forward<WaitForDevice>(wait_for_device)();
    ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    return stats;
}

}  // namespace tune::train
