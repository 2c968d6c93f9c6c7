// A build without CUDA: the factory and queries of kernels/cuda/cuda_backend.h
// answer that there is no CUDA backend, so callers need no #ifdefs.
#ifndef TUNE_HAVE_CUDA
#include "kernels/cuda/cuda_backend.h"
#include "kernels/error.h"

namespace tune::kernels {

namespace {

constexpr const char* kNoCuda =
    "this build of tune has no CUDA backend (configured with TUNE_CUDA=OFF or nvcc was not found)";

}  // namespace

bool cuda_backend_compiled() { return false; }

std::unique_ptr<Backend> make_cuda_backend(int) { throw BackendError(kNoCuda); }

std::unique_ptr<Backend> make_cuda_backend(const CudaBackendOptions&) { throw BackendError(kNoCuda); }

std::optional<CudaMemoryStats> cuda_memory_stats(const Backend&) { return std::nullopt; }

std::uint64_t cuda_device_used_bytes(int) { return 0; }

void reset_cuda_memory_marks(Backend&) {}

void release_cuda_device(int) {}

std::unique_ptr<DeviceTimer> make_cuda_timer(Backend&) { throw BackendError(kNoCuda); }

std::string cuda_attention_path(const Backend&) { return "tune's kernels (no CUDA backend)"; }

void* cuda_stream(Backend&) { throw BackendError(kNoCuda); }

int cuda_device(const Backend&) { throw BackendError(kNoCuda); }

}  // namespace tune::kernels
#endif
