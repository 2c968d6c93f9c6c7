#include "probe/probe_timing.h"

#include <chrono>
#include <cstddef>
#include <vector>

#include "core/step_statistics.h"

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
        const auto start = Clock::now();
        std::size_t calls = 0;
        double elapsed = 0;
        do {
            op();
            backend.synchronize();
            ++calls;
            elapsed = std::chrono::duration<double>(Clock::now() - start).count();
        } while (elapsed < round_seconds);
        per_call.push_back(elapsed / static_cast<double>(calls));
    }
    if (spent) *spent = std::chrono::duration<double>(Clock::now() - begin).count();
    return median_of(per_call);
}

kernels::DType dtype_of(ProbeDtype d) {
    switch (d) {
        case ProbeDtype::f32: return kernels::DType::f32;
        case ProbeDtype::bf16: return kernels::DType::bf16;
        case ProbeDtype::f16: return kernels::DType::f16;
    }
    return kernels::DType::f32;
}

}  // namespace tune::probe
