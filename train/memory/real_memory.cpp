#include "train/memory/real_memory.h"

#include <algorithm>
#include <chrono>
#include <limits>

#include "kernels/cuda/cuda_backend.h"
#include "train/memory/host_memory.h"

namespace tune::train {

namespace {

std::int64_t clamp_signed(double v) {
    constexpr double top = static_cast<double>(std::numeric_limits<std::int64_t>::max());
    return static_cast<std::int64_t>(std::clamp(v, -top, top));
}

}  // namespace

RealMemory real_memory(std::uint64_t baseline, std::uint64_t real_peak, std::uint64_t tagged_peak) {
    // In doubles: three values up to 2^64 must not wrap when subtracted.
    const double untracked =
        static_cast<double>(real_peak) - static_cast<double>(baseline) - static_cast<double>(tagged_peak);
    return {real_peak, baseline, clamp_signed(untracked)};
}

MemoryProbe process_probe() {
    MemoryProbe p;
    p.level = [] {
        const auto m = this_process_memory();
        return m ? std::optional<std::uint64_t>(m->rss) : std::nullopt;
    };
    p.high_water = [] {
        const auto m = this_process_memory();
        return m ? std::optional<std::uint64_t>(m->hwm) : std::nullopt;
    };
    p.restart_high_water = [] { return reset_peak_rss(); };
    return p;
}

MemoryProbe device_probe(int device) {
    MemoryProbe p;
    p.level = [device]() -> std::optional<std::uint64_t> {
        try {
            return kernels::cuda_device_used_bytes(device);
        } catch (...) {
            return std::nullopt;
        }
    };
    return p;
}

MemoryWatch::MemoryWatch(MemoryProbe probe, int period_ms) : probe_(std::move(probe)), period_ms_(period_ms) {
    high_water_valid_ = probe_.high_water && probe_.restart_high_water && probe_.restart_high_water();
    baseline_ = probe_.level ? probe_.level().value_or(0) : 0;
    seen_ = baseline_;
    if (probe_.level)
        sampler_ = std::thread([this] {
            while (!stop_.load()) {
                sample();
                std::this_thread::sleep_for(std::chrono::milliseconds(period_ms_));
            }
        });
}

MemoryWatch::~MemoryWatch() {
    stop_ = true;
    if (sampler_.joinable()) sampler_.join();
}

void MemoryWatch::sample() noexcept {
    try {
        const std::optional<std::uint64_t> now = probe_.level();
        if (now && *now > seen_.load()) seen_ = *now;
    } catch (...) {  // a sample lost is no reason to end the trial
    }
}

RealMemory MemoryWatch::finish(std::uint64_t tagged_peak) {
    stop_ = true;
    if (sampler_.joinable()) sampler_.join();
    if (probe_.level) sample();
    std::uint64_t peak = seen_.load();
    if (high_water_valid_)
        if (const std::optional<std::uint64_t> hwm = probe_.high_water()) peak = std::max(peak, *hwm);
    return real_memory(baseline_, peak, tagged_peak);
}

}  // namespace tune::train
