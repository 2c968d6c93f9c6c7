#include "kernels/speed_reference.h"

#include <chrono>

namespace tune::kernels {

ReferenceGemm::ReferenceGemm(Backend& backend)
    : a_(backend, kBytes),
      b_(backend, kBytes),
      c_(backend, kBytes),
      args_([this] {
          GemmArgs g;
          g.m = g.n = g.k = SpeedReference::kSize;
          g.a = a_.ptr, g.b = b_.ptr, g.c = c_.ptr;
          g.lda = g.ldb = g.ldc = SpeedReference::kSize;
          return g;
      }()),
      ws_bytes_(backend.gemm_workspace_bytes(args_)),
      ws_(backend, ws_bytes_) {}

void ReferenceGemm::run() { a_.backend.gemm(args_, {ws_.ptr, ws_bytes_}); }

double time_speed_reference(Backend& backend) {
    ReferenceGemm gemm(backend);
    gemm.run();
    backend.synchronize();
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < SpeedReference::kCalls; ++i) gemm.run();
    backend.synchronize();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace tune::kernels
