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
    auto gemm = std::make_shared<kernels::ReferenceGemm>(backend);
    return [gemm] { gemm->run(); };
}

std::function<void()> cache_displacer(kernels::Backend& backend) {
    const std::uint64_t bytes = backend.private_cache_bytes();
    if (bytes == 0) return [] {};
    auto scratch = std::make_shared<Scratch>(backend, bytes);
    return [&backend, scratch, bytes] { backend.fill_zero(scratch->ptr, bytes); };
}

}  // namespace tune::probe
