#include "probe/probe_timing.h"

#include <chrono>
#include <cstddef>

namespace tune::probe {

using Clock = std::chrono::steady_clock;

double seconds_per_call(kernels::Backend& backend, const std::function<void()>& op, double min_seconds,
                        double* spent) {
    const auto begin = Clock::now();
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
    } while (elapsed < min_seconds);
    if (spent) *spent = std::chrono::duration<double>(Clock::now() - begin).count();
    return elapsed / static_cast<double>(calls);
}

kernels::DType dtype_of(ProbeDtype d) {
    switch (d) {
        case ProbeDtype::f32: return kernels::DType::f32;
        case ProbeDtype::bf16: return kernels::DType::bf16;
        case ProbeDtype::f16: return kernels::DType::f16;
    }
    return kernels::DType::f32;
}

Scratch::Scratch(kernels::Backend& b, std::uint64_t bytes) : backend(b), bytes_(bytes) {
    if (bytes > 0) {
        ptr = b.allocate(bytes);
        b.fill_zero(ptr, bytes);
    }
}

Scratch::~Scratch() {
    if (ptr) backend.deallocate(ptr, bytes_);
}

}  // namespace tune::probe
