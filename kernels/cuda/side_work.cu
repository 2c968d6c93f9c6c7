// Backend::beside on the GPU: a second stream forks from the compute stream
// with an event, runs the ops (their launches read stream_, pointed at it for
// the while), and records a second event that wait() joins back. The side
// stream has the device's greatest priority: the copies it holds free device
// memory and feed the host's update, so their small kernels go first. No
// allocation happens on it: the memory pool orders its frees on the compute
// stream, behind wait().
#include <utility>

#include "kernels/cuda/cuda_backend.cuh"
#include "kernels/cuda/cuda_check.h"

namespace tune::kernels::cuda {

namespace {

class SideEvent final : public SideWork {
public:
    SideEvent(cudaEvent_t done, cudaStream_t compute) : done_(done), compute_(compute) {}
    ~SideEvent() override { cudaEventDestroy(done_); }
    SideEvent(const SideEvent&) = delete;
    SideEvent& operator=(const SideEvent&) = delete;
    void wait() override { TUNE_CUDA_CHECK(cudaStreamWaitEvent(compute_, done_, 0)); }

private:
    cudaEvent_t done_;
    cudaStream_t compute_;
};

cudaEvent_t new_event() {
    cudaEvent_t e = nullptr;
    TUNE_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    return e;
}

}  // namespace

std::unique_ptr<SideWork> CudaBackend::beside(std::function<void()> ops) {
    if (side_stream_ == nullptr) {
        int least = 0, greatest = 0;
        TUNE_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
        TUNE_CUDA_CHECK(cudaStreamCreateWithPriority(&side_stream_, cudaStreamNonBlocking, greatest));
    }
    const cudaEvent_t fork = new_event();
    TUNE_CUDA_CHECK(cudaEventRecord(fork, stream_));
    TUNE_CUDA_CHECK(cudaStreamWaitEvent(side_stream_, fork, 0));
    cudaEventDestroy(fork);  // released once the wait has passed it
    const cudaStream_t compute = std::exchange(stream_, side_stream_);
    try {
        ops();
    } catch (...) {
        stream_ = compute;
        throw;
    }
    stream_ = compute;
    const cudaEvent_t done = new_event();
    TUNE_CUDA_CHECK(cudaEventRecord(done, side_stream_));
    return std::make_unique<SideEvent>(done, compute);
}

}  // namespace tune::kernels::cuda
