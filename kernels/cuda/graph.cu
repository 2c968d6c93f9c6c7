// Backend::record on the GPU: the ops are captured from the backend's stream
// into a CUDA graph, instantiated once and launched on that stream per replay.
// Thread-local mode: a call of this thread that waits for the device breaks the
// capture, while NCCL's proxy threads keep making their own calls.
// A capture that fails raises BackendError naming what broke it; the stream
// is left out of capture either way.
#include "kernels/cuda/cuda_backend.cuh"
#include "kernels/cuda/cuda_check.h"

namespace tune::kernels::cuda {

namespace {

class CudaGraph final : public OpGraph {
public:
    CudaGraph(cudaGraphExec_t exec, cudaStream_t stream) : exec_(exec), stream_(stream) {}
    ~CudaGraph() override { cudaGraphExecDestroy(exec_); }
    CudaGraph(const CudaGraph&) = delete;
    CudaGraph& operator=(const CudaGraph&) = delete;
    void replay() override { TUNE_CUDA_CHECK(cudaGraphLaunch(exec_, stream_)); }

private:
    cudaGraphExec_t exec_;
    cudaStream_t stream_;
};

}  // namespace

std::unique_ptr<OpGraph> CudaBackend::record(std::function<void()> ops) {
    TUNE_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
    cudaGraph_t graph = nullptr;
    try {
        ops();
    } catch (...) {
        cudaStreamEndCapture(stream_, &graph);
        if (graph != nullptr) cudaGraphDestroy(graph);
        cudaGetLastError();  // the capture's error is this exception's, not the next call's
        throw;
    }
    const cudaError_t ended = cudaStreamEndCapture(stream_, &graph);
    if (ended != cudaSuccess) {
        cudaGetLastError();
        throw BackendError(std::string("cuda backend: record: the capture failed (") + cudaGetErrorName(ended) +
                           "): an op waited for the device, allocated, or ran its first call of a shape");
    }
    cudaGraphExec_t exec = nullptr;
    const cudaError_t made = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    TUNE_CUDA_CHECK(made);
    return std::make_unique<CudaGraph>(exec, stream_);
}

}  // namespace tune::kernels::cuda
