#include "probe/probe_timing.h"

#include <chrono>
#include <cstddef>
#include <memory>
#include <vector>

#include "core/step_statistics.h"
#include "kernels/speed_reference.h"

namespace tune::probe {

using Clock = std::chrono::steady_clock;

double seconds_per_call(kernels::Backend& backend, const std::function<void()>& op, const ProbeSettings& s,
                        double* spent) {
    const auto begin = Clock::now();
    op();
    backend.synchronize();
    const double round_seconds = s.min_seconds / ProbeSettings::kRounds;
    std::vector<double> per_call;
    for (int round = 0; round < ProbeSettings::kRounds; ++round) {
        std::size_t calls = 0;
        double timed = 0;
        do {
            if (s.before_each_call) {
                s.before_each_call();
                backend.synchronize();
            }
            const auto start = Clock::now();
            op();
            backend.synchronize();
            timed += std::chrono::duration<double>(Clock::now() - start).count();
            ++calls;
        } while (timed < round_seconds);
        per_call.push_back(timed / static_cast<double>(calls));
    }
    if (spent) *spent = std::chrono::duration<double>(Clock::now() - begin).count();
    return median_of(per_call);
}

std::function<void()> gemm_primer(kernels::Backend& backend) {
    constexpr std::int64_t n = kernels::SpeedReference::kSize;
    constexpr std::uint64_t bytes = n * n * sizeof(float);
    struct Primer {
        std::uint64_t ws_bytes;
        Scratch a, b, c, ws;
        kernels::GemmArgs args;
        Primer(kernels::Backend& backend, const kernels::GemmArgs& g)
            : ws_bytes(backend.gemm_workspace_bytes(g)), a(backend, bytes), b(backend, bytes), c(backend, bytes),
              ws(backend, ws_bytes), args(g) {
            args.a = a.ptr, args.b = b.ptr, args.c = c.ptr;
        }
    };
    kernels::GemmArgs g;
    g.m = g.n = g.k = n;
    g.lda = g.ldb = g.ldc = n;
    auto primer = std::make_shared<Primer>(backend, g);
    return [&backend, primer] { backend.gemm(primer->args, {primer->ws.ptr, primer->ws_bytes}); };
}

}  // namespace tune::probe
