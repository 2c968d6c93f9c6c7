#include "kernels/speed_reference.h"

#include <algorithm>
#include <chrono>

namespace tune::kernels {
namespace {

// A backend buffer for the duration of one reference run.
class ReferenceBuffer {
public:
    ReferenceBuffer(Backend& backend, std::uint64_t bytes) : backend_(backend), bytes_(bytes) {
        ptr_ = backend_.allocate(bytes_);
        backend_.fill_zero(ptr_, bytes_);
    }
    ~ReferenceBuffer() { backend_.deallocate(ptr_, bytes_); }
    ReferenceBuffer(const ReferenceBuffer&) = delete;
    ReferenceBuffer& operator=(const ReferenceBuffer&) = delete;
    void* get() const { return ptr_; }

private:
    Backend& backend_;
    std::uint64_t bytes_;
    void* ptr_ = nullptr;
};

}  // namespace

double time_speed_reference(Backend& backend) {
    constexpr std::int64_t n = SpeedReference::kSize;
    constexpr std::uint64_t bytes = n * n * sizeof(float);
    ReferenceBuffer a(backend, bytes), b(backend, bytes), c(backend, bytes);
    GemmArgs args;
    args.m = args.n = args.k = n;
    args.a = a.get(), args.b = b.get(), args.c = c.get();
    args.lda = args.ldb = args.ldc = n;
    const std::uint64_t ws_bytes = backend.gemm_workspace_bytes(args);
    ReferenceBuffer ws(backend, std::max<std::uint64_t>(ws_bytes, 1));
    const Workspace workspace{ws.get(), ws_bytes};
    backend.gemm(args, workspace);
    backend.synchronize();
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < SpeedReference::kCalls; ++i) backend.gemm(args, workspace);
    backend.synchronize();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace tune::kernels
