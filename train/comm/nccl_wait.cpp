// Polling NCCL with a deadline.
#include "train/comm/nccl_wait.h"

#include <cstdlib>

#include <fmt/format.h>

#include "core/environment.h"
#include "train/comm/comm_error.h"

namespace tune::train {

void wait_or_abort(const std::function<NcclPoll()>& poll, std::chrono::steady_clock::duration timeout,
                   const std::function<void()>& abort, const std::string& what, const WaitClock& clock) {
    const auto deadline = clock.now() + timeout;
    for (;;) {
        const NcclPoll p = poll();
        if (p.state == NcclPoll::State::done) return;
        if (p.state == NcclPoll::State::failed) {
            abort();
            throw CommError(fmt::format("nccl: {} failed: {} (communicator aborted)", what, p.error));
        }
        if (clock.now() >= deadline) {
            abort();
            throw CommError(
                fmt::format("nccl: {} did not finish within {:.0f} s (communicator aborted; a peer may "
                            "have failed or hung; TUNE_NCCL_TIMEOUT_S sets the limit)",
                            what, std::chrono::duration<double>(timeout).count()));
        }
        clock.pause();
    }
}

std::chrono::steady_clock::duration nccl_timeout() {
    const double seconds = environment_number("TUNE_NCCL_TIMEOUT_S", 0.001, 1e7).value_or(300.0);
    return std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(seconds));
}

}  // namespace tune::train
