// Waiting on NCCL without hanging. NCCL reports a failed peer or network
// asynchronously (ncclCommGetAsyncError) while the collective, or a
// non-blocking init, simply never finishes; a plain cudaStreamSynchronize
// would then wait until the trial's timeout. wait_or_abort polls instead:
// done, still pending, or failed, until a deadline; on failure or at the
// deadline it aborts the communicator (ncclCommAbort, so the other ranks'
// NCCL errors out too) and raises CommError. Plain C++ with the clock and
// the pause injected, so it is tested without NCCL and without waiting.
#pragma once

#include <chrono>
#include <functional>
#include <string>

namespace tune::train {

struct NcclPoll {
    enum class State { done, pending, failed } state = State::done;
    std::string error;  // when failed
};

struct WaitClock {
    std::function<std::chrono::steady_clock::time_point()> now = [] { return std::chrono::steady_clock::now(); };
    std::function<void()> pause = [] {};  // between polls (the real one sleeps briefly)
};

// Raises CommError("nccl: <what> ...") after calling abort() when poll()
// fails or `timeout` passes first.
void wait_or_abort(const std::function<NcclPoll()>& poll, std::chrono::steady_clock::duration timeout,
                   const std::function<void()>& abort, const std::string& what, const WaitClock& clock = {});

// The deadline of every NCCL wait: TUNE_NCCL_TIMEOUT_S seconds, 300 by default.
std::chrono::steady_clock::duration nccl_timeout();

}  // namespace tune::train
