#include "kernels/speed_reference.h"

#include <chrono>

#include "kernels/scratch.h"

namespace tune::kernels {

double time_speed_reference(Backend& backend) {
    constexpr std::int64_t n = SpeedReference::kSize;
    constexpr std::uint64_t bytes = n * n * sizeof(float);
    Scratch a(backend, bytes), b(backend, bytes), c(backend, bytes);
    GemmArgs args;
    args.m = args.n = args.k = n;
    args.a = a.ptr, args.b = b.ptr, args.c = c.ptr;
    args.lda = args.ldb = args.ldc = n;
    const std::uint64_t ws_bytes = backend.gemm_workspace_bytes(args);
    Scratch ws(backend, ws_bytes);
    const Workspace workspace{ws.ptr, ws_bytes};
    backend.gemm(args, workspace);
    backend.synchronize();
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < SpeedReference::kCalls; ++i) backend.gemm(args, workspace);
    backend.synchronize();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace tune::kernels
