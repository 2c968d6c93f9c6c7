// CudaBackend construction, memory, copies and synchronisation; the factory,
// memory statistics and event timer declared in cuda_backend.h.
#include "kernels/cuda/cuda_backend.cuh"

#include <fmt/format.h>

#include <cstdlib>
#include <string_view>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.cuh"

namespace tune::kernels {

namespace cuda {

namespace {

std::uint64_t device_used_now() {
    std::size_t free_bytes = 0, total_bytes = 0;
    TUNE_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    return total_bytes - free_bytes;
}

void bind_device(int device) {
    int count = 0;
    const cudaError_t status = cudaGetDeviceCount(&count);
    if (status != cudaSuccess) {
        cudaGetLastError();
        throw BackendError(fmt::format("cuda backend: no usable CUDA device: {}", cudaGetErrorString(status)));
    }
    if (device < 0 || device >= count)
        throw BackendError(fmt::format("cuda backend: device {} does not exist ({} visible)", device, count));
    TUNE_CUDA_CHECK(cudaSetDevice(device));
    TUNE_CUDA_CHECK(cudaFree(nullptr));  // creates the primary context now, so it can be measured
}

}  // namespace

CudaBackend::CudaBackend(const CudaBackendOptions& options) : device_(options.device) {
    name_ = fmt::format("cuda:{}", device_);
    bind_device(device_);
    std::size_t free_bytes = 0, total_bytes = 0;
    TUNE_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    init_stats_.total_bytes = total_bytes;
    init_stats_.context_bytes = total_bytes - free_bytes;

    TUNE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    pool_ = std::make_unique<MemoryPool>(device_, stream_);
    if (options.device_pages) pages_ = DevicePages::open(device_);
    const std::uint64_t before_cublas = device_used_now();
    gemm_ = std::make_unique<GemmLt>(stream_, *pool_,
                                     GemmOptions{options.time_gemm_candidates, options.gemm_candidates,
                                                 options.gemm_cache_entries, options.gemm_tuning_scratch_limit});
    // cuDNN's fused attention where the library loads; its handle's memory counts with cuBLASLt's.
    cudnn_ = cudnn::CudnnAttention::open(
        load_cudnn(), stream_, [this](void* p, std::uint64_t n) { fill_zero(p, n); }, cudnn_why_not_);
    const std::uint64_t after_cublas = device_used_now();
    init_stats_.cublas_bytes = after_cublas > before_cublas ? after_cublas - before_cublas : 0;

    TUNE_CUDA_CHECK(cudaMalloc(&scratch_block_, BackendScratch::bytes()));
    // On stream_ (non-blocking: it would not wait for work on the legacy default stream).
    TUNE_CUDA_CHECK(cudaMemsetAsync(scratch_block_, 0, BackendScratch::bytes(), stream_));
    scratch_.errors = static_cast<DeviceErrorRecord*>(scratch_block_);
    scratch_.partials = reinterpret_cast<float*>(static_cast<char*>(scratch_block_) + 256);
    init_stats_.backend_bytes = BackendScratch::bytes();
    upload_quant_maps();
}

CudaBackend::~CudaBackend() {
    if (side_stream_ != nullptr) {
        cudaStreamSynchronize(side_stream_);
        cudaStreamDestroy(side_stream_);
    }
    cudaStreamSynchronize(stream_);
    cudnn_.reset();
    gemm_.reset();
    pool_.reset();
    pages_.reset();
    cudaFree(scratch_block_);
    cudaStreamDestroy(stream_);
}

CudaMemoryStats CudaBackend::memory_stats() const {
    CudaMemoryStats s = init_stats_;
    s.pool_reserved_bytes = pool_->reserved_bytes();
    s.pool_reserved_high_bytes = pool_->reserved_high_bytes();
    s.pool_used_high_bytes = pool_->used_high_bytes();
    s.gemm_tuning_bytes = gemm_->tuning_bytes();
    if (pages_) {
        s.pages_bytes = pages_->backed_bytes();
        s.pages_high_bytes = pages_->backed_high_bytes();
    }
    return s;
}

void CudaBackend::reset_memory_high_marks() {
    pool_->reset_high_marks();
    if (pages_) pages_->reset_high();
}

void* CudaBackend::allocate(std::uint64_t bytes) { return pool_->allocate(bytes); }

void CudaBackend::trim_memory() {
    synchronize();
    pool_->trim();
}

void CudaBackend::deallocate(void* ptr, std::uint64_t bytes) noexcept { pool_->deallocate(ptr, bytes); }

void* CudaBackend::allocate_host(std::uint64_t bytes) {
    void* ptr = nullptr;
    if (cudaHostAlloc(&ptr, bytes, cudaHostAllocPortable | cudaHostAllocMapped) != cudaSuccess) {
        cudaGetLastError();  // not sticky: the trial reports an out-of-memory, not a broken device
        throw OutOfMemoryError(bytes, 0, "pinned host memory (cudaHostAlloc)");
    }
    return ptr;
}

void CudaBackend::deallocate_host(void* ptr, std::uint64_t) noexcept { cudaFreeHost(ptr); }

std::uint64_t CudaBackend::live_bytes() const { return pool_->live_bytes(); }

void CudaBackend::copy_to_device(void* dst, const void* host_src, std::uint64_t bytes) {
    if (bytes == 0) return;
    TUNE_CUDA_CHECK(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, stream_));
    // The caller may reuse host_src on return (pinned sources would otherwise still be in flight).
    TUNE_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void CudaBackend::copy_to_host(void* host_dst, const void* src, std::uint64_t bytes) {
    if (bytes > 0) TUNE_CUDA_CHECK(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, stream_));
    synchronize();
}

void CudaBackend::copy(void* dst, const void* src, std::uint64_t bytes) {
    // Default: either side may be pinned host memory (allocate_host), told apart by its address.
    if (bytes > 0) TUNE_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream_));
}

void CudaBackend::fill_zero(void* dst, std::uint64_t bytes) {
    if (bytes > 0) TUNE_CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes, stream_));
}

void CudaBackend::synchronize() {
    if (side_stream_ != nullptr) TUNE_CUDA_CHECK(cudaStreamSynchronize(side_stream_));
    TUNE_CUDA_CHECK(cudaStreamSynchronize(stream_));
    raise_device_errors();
}

void CudaBackend::raise_device_errors() {
    DeviceErrorRecord record{};
    TUNE_CUDA_CHECK(cudaMemcpyAsync(&record, scratch_.errors, sizeof record, cudaMemcpyDeviceToHost, stream_));
    TUNE_CUDA_CHECK(cudaStreamSynchronize(stream_));
    if (record.code == 0) return;
    TUNE_CUDA_CHECK(cudaMemsetAsync(scratch_.errors, 0, sizeof record, stream_));  // reported once
    TUNE_CUDA_CHECK(cudaStreamSynchronize(stream_));
    const char* what = static_cast<DeviceErrorCode>(record.code) == DeviceErrorCode::token_out_of_range
                           ? "embedding: token"
                           : "cross_entropy: target";
    throw BackendError(fmt::format("cuda backend: {} {} at {} outside the vocabulary of {}", what, record.value,
                                   record.index, record.limit));
}

std::uint64_t CudaBackend::gemm_workspace_bytes(const GemmArgs&) const { return GemmLt::kWorkspaceBytes; }

void CudaBackend::gemm(const GemmArgs& args, Workspace ws) { gemm_->run(args, ws); }

// Events on the backend's stream.
class EventTimer final : public DeviceTimer {
public:
    explicit EventTimer(cudaStream_t stream) : stream_(stream) {
        TUNE_CUDA_CHECK(cudaEventCreate(&start_));
        TUNE_CUDA_CHECK(cudaEventCreate(&stop_));
    }
    ~EventTimer() override {
        cudaEventDestroy(start_);
        cudaEventDestroy(stop_);
    }
    EventTimer(const EventTimer&) = delete;
    EventTimer& operator=(const EventTimer&) = delete;

    void start() override { TUNE_CUDA_CHECK(cudaEventRecord(start_, stream_)); }
    void stop() override { TUNE_CUDA_CHECK(cudaEventRecord(stop_, stream_)); }
    double seconds() override {
        TUNE_CUDA_CHECK(cudaEventSynchronize(stop_));
        float ms = 0;
        TUNE_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
        return ms / 1e3;
    }

private:
    cudaStream_t stream_;
    cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

}  // namespace cuda

bool cuda_backend_compiled() { return true; }

std::unique_ptr<Backend> make_cuda_backend(int device) {
    CudaBackendOptions options;
    options.device = device;
    const char* pages = std::getenv("TUNE_CUDA_PAGES");
    options.device_pages = pages != nullptr && std::string_view(pages) == "1";
    return make_cuda_backend(options);
}

std::unique_ptr<Backend> make_cuda_backend(const CudaBackendOptions& options) {
    return std::make_unique<cuda::CudaBackend>(options);
}

std::optional<CudaMemoryStats> cuda_memory_stats(const Backend& backend) {
    const auto* cuda = dynamic_cast<const cuda::CudaBackend*>(&backend);
    if (cuda == nullptr) return std::nullopt;
    return cuda->memory_stats();
}

void reset_cuda_memory_marks(Backend& backend) {
    if (auto* cuda = dynamic_cast<cuda::CudaBackend*>(&backend)) cuda->reset_memory_high_marks();
}

void release_cuda_device(int device) {
    TUNE_CUDA_CHECK(cudaSetDevice(device));
    TUNE_CUDA_CHECK(cudaDeviceReset());
}

std::uint64_t cuda_device_used_bytes(int device) {
    int current = 0;
    TUNE_CUDA_CHECK(cudaGetDevice(&current));
    TUNE_CUDA_CHECK(cudaSetDevice(device));
    const std::uint64_t used = cuda::device_used_now();
    TUNE_CUDA_CHECK(cudaSetDevice(current));
    return used;
}

std::unique_ptr<DeviceTimer> make_cuda_timer(Backend& backend) {
    auto* cuda = dynamic_cast<cuda::CudaBackend*>(&backend);
    if (cuda == nullptr)
        throw BackendError(fmt::format("make_cuda_timer: backend {} is not a CUDA backend", backend.name()));
    return std::make_unique<cuda::EventTimer>(cuda->stream());
}

int cuda_device(const Backend& backend) {
    const auto* cuda = dynamic_cast<const cuda::CudaBackend*>(&backend);
    if (cuda == nullptr)
        throw BackendError(fmt::format("cuda_device: backend {} is not a CUDA backend", backend.name()));
    return cuda->device();
}

std::string cuda_attention_path(const Backend& backend) {
    const auto* cuda = dynamic_cast<const cuda::CudaBackend*>(&backend);
    return cuda != nullptr ? cuda->attention_path() : std::string("tune's kernels");
}

void* cuda_stream(Backend& backend) {
    auto* cuda = dynamic_cast<cuda::CudaBackend*>(&backend);
    if (cuda == nullptr)
        throw BackendError(fmt::format("cuda_stream: backend {} is not a CUDA backend", backend.name()));
    return cuda->stream();
}

}  // namespace tune::kernels
