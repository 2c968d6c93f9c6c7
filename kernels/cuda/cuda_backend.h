// The CUDA backend as the rest of tune sees it: a factory, the device memory
// figures the trainer reports as overheads, and an event timer. No CUDA
// headers here, so the trainer and CLI include it in every build; a build
// without CUDA links a stub whose factory raises a clear BackendError.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "kernels/backend.h"

namespace tune::kernels {

struct CudaBackendOptions {
    int device = 0;
    // Time the cuBLASLt heuristic's candidates once per GEMM shape and keep
    // the fastest (otherwise its first choice is used).
    bool time_gemm_candidates = true;
    int gemm_candidates = 8;
    std::uint64_t gemm_cache_entries = 1024;
    // Timing a GEMM that reads C (beta != 0) writes into a scratch copy of C;
    // a larger such C tries the candidates on its own first calls instead, so
    // the spike stays bounded. One that overwrites C is timed writing C itself.
    std::uint64_t gemm_tuning_scratch_limit = 64ull << 20;
    // Large buffers as the driver's pages (kernels/cuda/device_pages.cuh),
    // which the trainer keeps within the tagged peak, instead of the
    // stream-ordered pool. Off by default: keeping within the peak moves
    // pages every step, and each move waits for the device (the cost on an
    // H100: the real-memory file in docs/results/). make_cuda_backend(int) turns it on when
    // TUNE_CUDA_PAGES=1, to compare the two on a GPU.
    bool device_pages = false;
};

// Whether this build has the CUDA backend at all.
bool cuda_backend_compiled();

// Binds `device`, creates the stream, memory pool and cuBLASLt handle.
// Raises BackendError when CUDA is not compiled in or the device is unusable.
std::unique_ptr<Backend> make_cuda_backend(int device);
std::unique_ptr<Backend> make_cuda_backend(const CudaBackendOptions& options);

// Device memory as the driver and the pool see it. "used" is total - free
// from cudaMemGetInfo, which counts every process on the device and cannot
// be read before a context exists: context_bytes is the device's use right
// after this process's context was created, which is the context's own size
// when the trial has the GPU to itself (as the sweep driver arranges).
struct CudaMemoryStats {
    std::uint64_t total_bytes = 0;
    std::uint64_t context_bytes = 0;             // CUDA context (plus any other process's memory)
    std::uint64_t cublas_bytes = 0;              // cuBLASLt handle and its internal state
    std::uint64_t backend_bytes = 0;             // the backend's own scratch (reduction partials, error flag)
    std::uint64_t pool_reserved_bytes = 0;       // the pool holds from the device now
    std::uint64_t pool_reserved_high_bytes = 0;  // the most it ever held
    std::uint64_t pool_used_high_bytes = 0;      // the most handed out at once (allocation granularity included)
    std::uint64_t gemm_tuning_bytes = 0;         // largest scratch output used while timing GEMM candidates
    std::uint64_t pages_bytes = 0;               // physical pages mapped for large buffers now
    std::uint64_t pages_high_bytes = 0;          // the most mapped at once
};

// The stats when `backend` is a CUDA backend, nullopt otherwise.
std::optional<CudaMemoryStats> cuda_memory_stats(const Backend& backend);

// Restarts the pool's high-water marks (a trial does after its warm-up, so
// GEMM tuning scratch does not pin them); nothing on other backends.
void reset_cuda_memory_marks(Backend& backend);

// Destroys this process's primary context on `device` (cudaDeviceReset) and
// the memory it holds (about 0.5 GiB on an H100): a process done with the
// device, as the sweep driver is after its probes, then holds none of it while
// its trials run there. Every backend on the device must be gone. Nothing
// without CUDA.
void release_cuda_device(int device);

// total - free on `device` now; the trainer reads it around NCCL
// initialisation to attribute NCCL's buffers.
std::uint64_t cuda_device_used_bytes(int device);

// Wall time of work on a backend's stream between start() and stop(),
// measured with CUDA events (no host synchronisation until seconds()).
class DeviceTimer {
public:
    virtual ~DeviceTimer() = default;
    virtual void start() = 0;
    virtual void stop() = 0;
    virtual double seconds() = 0;  // waits for stop's event
};

// A timer on `backend`'s stream; raises BackendError when it is not a CUDA backend.
std::unique_ptr<DeviceTimer> make_cuda_timer(Backend& backend);

// Which attention a CUDA backend ran: cuDNN's fused graphs, with their calls
// and any fallback's reason, or tune's kernels and why cuDNN was not used.
std::string cuda_attention_path(const Backend& backend);

// The cudaStream_t `backend` runs its ops on (untyped, so this header needs
// no CUDA headers): NCCL collectives (train/comm/comm_nccl) are enqueued on it,
// ordered with the ops. Raises BackendError when it is not a CUDA backend.
void* cuda_stream(Backend& backend);

// The device `backend` is bound to (what NCCL must use with its stream;
// cudaStreamGetDevice would say the same but needs a 12.8 runtime). Raises
// BackendError when it is not a CUDA backend.
int cuda_device(const Backend& backend);

}  // namespace tune::kernels
