#include "probe/probe_timing.h"

#include <chrono>
#include <cstddef>

#include "kernels/speed_reference.h"

namespace tune::probe {

using Clock = std::chrono::steady_clock;

double seconds_per_call(kernels::Backend& backend, const std::function<void()>& op, const ProbeSettings& s,
                        double* spent) {
    const auto begin = Clock::now();
    const double reference_before = s.speed_reference_s > 0 ? kernels::time_speed_reference(backend) : 0.0;
    op();
    backend.synchronize();
    const auto start = Clock::now();
    std::size_t calls = 0;
    double elapsed = 0;
    do {
        op();
        backend.synchronize();
        ++calls;
        elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    } while (elapsed < s.min_seconds);
    double slowdown = 1.0;
    if (s.speed_reference_s > 0)
        slowdown = (reference_before + kernels::time_speed_reference(backend)) / 2 / s.speed_reference_s;
    if (spent) *spent = std::chrono::duration<double>(Clock::now() - begin).count();
    return elapsed / static_cast<double>(calls) / slowdown;
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
