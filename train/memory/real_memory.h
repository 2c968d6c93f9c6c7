// What the machine saw a trial use, beside what the tagged allocator counted:
//   real_peak  the most the process (CPU: resident set) or the device (GPU:
//              total - free from cudaMemGetInfo) held during the trial;
//   baseline   what it held before the model's first allocation;
//   untracked  real_peak - baseline - tagged peak: memory neither the
//              allocator nor the baseline explains (allocator slack, library
//              scratch, pages a library kept). Negative when tagged pages were
//              never touched (a CPU buffer is resident only once written).
// A sampler thread reads the level every few milliseconds while the steps
// run, so a GPU (which has no high-water mark of its own) gets one, and a
// CPU trial's VmHWM is checked against what was seen.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <thread>

namespace tune::train {

struct RealMemory {
    std::uint64_t real_peak = 0;
    std::uint64_t baseline = 0;
    std::int64_t untracked = 0;
};

// The arithmetic: untracked from the three measurements (saturating at the int64 range).
RealMemory real_memory(std::uint64_t baseline, std::uint64_t real_peak, std::uint64_t tagged_peak);

// How a trial reads the level it watches: bytes now, and (CPU only) the
// kernel's own high-water mark since the last restart.
struct MemoryProbe {
    std::function<std::optional<std::uint64_t>()> level;
    std::function<std::optional<std::uint64_t>()> high_water;  // may be empty
    std::function<bool()> restart_high_water;                  // may be empty; false: refused
};
// The process's resident set (VmRSS, VmHWM reset through clear_refs).
MemoryProbe process_probe();
// The device's used bytes (total - free): every process on it, as nvidia-smi shows.
MemoryProbe device_probe(int device);

// Takes the baseline when constructed (before the model's first allocation)
// and samples the level until finish().
class MemoryWatch {
public:
    explicit MemoryWatch(MemoryProbe probe, int period_ms = 2);
    MemoryWatch(const MemoryWatch&) = delete;
    MemoryWatch& operator=(const MemoryWatch&) = delete;
    ~MemoryWatch();

    std::uint64_t baseline() const { return baseline_; }
    // Stops sampling; the result against the allocator's peak. Idempotent.
    RealMemory finish(std::uint64_t tagged_peak);

private:
    void sample() noexcept;

    MemoryProbe probe_;
    std::uint64_t baseline_ = 0;
    bool high_water_valid_ = false;  // restarted at the baseline, so it says nothing of before
    std::atomic<std::uint64_t> seen_{0};
    std::atomic<bool> stop_{false};
    std::thread sampler_;
    int period_ms_;
};

}  // namespace tune::train
