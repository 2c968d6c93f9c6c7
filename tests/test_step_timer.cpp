// A step's time includes waiting for the device (train/step_timer.h): the
// queued work of a GPU step is stood in for by a wait that sleeps.
#include <catch2/catch.hpp>

#include <chrono>
#include <thread>

#include "train/step_timer.h"

TEST_CASE("a step's time ends when the device has finished the step, not when the host returns") {
    using namespace std::chrono_literals;
    double ms = 0;
    bool waited = false;
    const int stats = tune::train::time_step_to_completion(
        [] { return 7; },  // the host returns at once
        [&] {
            std::this_thread::sleep_for(40ms);  // the device still has the step's work queued
            waited = true;
        },
        ms);
    CHECK(stats == 7);
    CHECK(waited);
    CHECK(ms >= 40.0);  // a lower bound set by the sleep, not a speed target
}
