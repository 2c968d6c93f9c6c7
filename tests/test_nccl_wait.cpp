// wait_or_abort: NCCL's asynchronous errors and hangs end in CommError and
// an aborted communicator instead of a wait until the trial's timeout. The
// clock is simulated: nothing here sleeps or measures time.
#include <catch2/catch.hpp>

#include "train/comm/comm_error.h"
#include "train/comm/nccl_wait.h"

using namespace tune::train;
using namespace std::chrono_literals;

namespace {

// A clock that moves one second per look.
struct FakeClock {
    std::chrono::steady_clock::time_point t{};
    WaitClock clock() {
        return WaitClock{[this] { return t += 1s; }, [] {}};
    }
};

}  // namespace

TEST_CASE("nccl wait: done after some pending polls returns without aborting") {
    FakeClock fake;
    int polls = 0, aborts = 0;
    wait_or_abort(
        [&] {
            return ++polls < 3 ? NcclPoll{NcclPoll::State::pending, ""} : NcclPoll{};
        },
        60s, [&] { ++aborts; }, "all_reduce", fake.clock());
    CHECK(polls == 3);
    CHECK(aborts == 0);
}

TEST_CASE("nccl wait: an asynchronous error aborts the communicator and raises CommError") {
    FakeClock fake;
    int aborts = 0;
    auto failing = [] { return NcclPoll{NcclPoll::State::failed, "ncclRemoteError: a peer exited"}; };
    CHECK_THROWS_WITH(wait_or_abort(
                          failing, 60s, [&] { ++aborts; }, "all_reduce", fake.clock()),
                      Catch::Contains("a peer exited") && Catch::Contains("aborted"));
    CHECK(aborts == 1);
}

TEST_CASE("nccl wait: a collective that never finishes is aborted at the deadline") {
    FakeClock fake;
    int polls = 0, aborts = 0;
    auto pending = [&] {
        ++polls;
        return NcclPoll{NcclPoll::State::pending, ""};
    };
    CHECK_THROWS_AS(wait_or_abort(
                        pending, 5s, [&] { ++aborts; }, "init", fake.clock()),
                    CommError);
    CHECK(aborts == 1);
    CHECK(polls >= 2);
    CHECK(polls <= 6);
}
