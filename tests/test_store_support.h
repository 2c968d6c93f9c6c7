// Builders and a scratch directory shared by the store tests.
#pragma once

#include <functional>

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>

#include <fmt/format.h>

#include "core/presets.h"
#include "store/store.h"

namespace tune::test {

// A fresh directory under the system temp dir, removed with everything in it.
class ScratchDir {
public:
    ScratchDir() {
        static std::atomic<int> counter{0};
        path_ =
            std::filesystem::temp_directory_path() / fmt::format("tune-store-{}-{}", ::getpid(), counter.fetch_add(1));
        std::filesystem::remove_all(path_);
        std::filesystem::create_directories(path_);
    }
    ~ScratchDir() {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    ScratchDir(const ScratchDir&) = delete;
    ScratchDir& operator=(const ScratchDir&) = delete;
    std::string file(const std::string& name) const { return (path_ / name).string(); }

private:
    std::filesystem::path path_;
};

// The database `fill` writes through a read-write store, reopened read-only as
// the reports open it.
template <class Fill>
Store written_then_read_only(const ScratchDir& dir, Fill&& fill) {
    {
        Store db(dir.file("t.db"), Store::Mode::read_write);
        fill(db);
    }
    return Store(dir.file("t.db"), Store::Mode::read_only);
}

// Distinct configurations for distinct i, every dimension varied.
inline TrialConfig sample_config(int i) {
    TrialConfig c;
    c.model = *find_model("tiny");
    c.optimizer = kOptimizers[static_cast<std::size_t>(i) % kOptimizers.size()];
    c.precision = kPrecisions[static_cast<std::size_t>(i / 5) % kPrecisions.size()];
    c.checkpointing = kCheckpointings[static_cast<std::size_t>(i / 20) % kCheckpointings.size()];
    // Unsigned arithmetic keeps every value in range for negative i too (the busy-writer test enumerates those).
    const auto k = static_cast<std::size_t>(i);
    c.zero_stage = static_cast<std::uint32_t>(k % 4);
    c.world_size = 1u << (k % 3);
    c.micro_batch = 1 + static_cast<std::uint32_t>(k % 2);
    c.grad_accum = 1 + static_cast<std::uint32_t>(k % 3);
    c.context = 64u << (k % 3);
    c.steps = 6;
    c.warmup = 2;
    c.seed = 1000 + static_cast<std::uint64_t>(i);
    return c;
}

inline Estimate sample_estimate(int i) {
    Estimate e;
    for (std::size_t k = 0; k < kComponentCount; ++k)
        e.memory.bytes[k] = 1000 * (k + 1) + static_cast<std::uint64_t>(i);
    e.memory.peak = e.memory.total();
    e.memory.peak_phase = "lm-head-backward";
    e.step_s = 0.25 + i * 1e-3;
    e.tokens_per_s = 5000.5 + i;
    e.mfu = 0.375;
    e.fits = i % 2 == 0;
    return e;
}

// A complete measured result for config c: every field set, six steps.
inline TrialResult sample_result(const TrialConfig& c, int i) {
    TrialResult r;
    r.status = TrialStatus::ok;
    r.config = c;
    for (std::size_t k = 0; k < kComponentCount; ++k)
        r.memory.bytes[k] = 2000 * (k + 1) + static_cast<std::uint64_t>(i);
    r.memory.peak = r.memory.total() + 17;
    r.memory.peak_phase = "optimizer-step";
    r.rank_peaks = {r.memory.peak, r.memory.peak - 5};
    r.estimate = sample_estimate(i);
    r.step_ms = {31.5, 30.25, 20.0, 21.0, 22.0, 23.0 + i};
    r.losses = {5.5, 5.25, 5.0, 4.875, 4.75, 4.5};
    r.tokens_per_s = 12345.625 + i;
    r.mfu = 0.4375;
    r.comm_bytes = 1ull << 33;
    r.comm_s = 0.0125;
    r.attention = "cuDNN 9.19.0: 24 forward and 24 backward calls";  // a GPU trial's
    return r;
}

inline SweepRecord sample_sweep(const std::string& name, const std::string& spec = "name = \"x\"") {
    SweepRecord s;
    s.name = name;
    s.spec_text = spec;
    s.spec_hash = stable_hash(spec);
    s.created_at = Timestamp{std::chrono::milliseconds{1'790'000'000'123}};
    s.host = "node-17";
    s.device = {"NVIDIA H100 80GB HBM3", 8, 85'520'809'984};
    s.backend = "cuda";
    s.software = {"0.1.0", "5a599d9abcde", "12.4", "2.21.5", "550.54.15"};
    s.plan = {{"strategy", "pareto-first"}, {"margin", 0.05}};
    return s;
}

// Adds n pending trials (configs first..first+n-1) with estimates.
inline void add_pending(Store& store, SweepId sweep, int first, int n) {
    std::vector<NewTrial> trials;
    for (int i = first; i < first + n; ++i)
        trials.push_back({sample_config(i), TrialStatus::pending, "", sample_estimate(i), 0, {}});
    store.add_trials(sweep, trials);
}

// A new sweep `name` of `pending` trials, the first recorded failed with `reason` and `stderr_tail`,
// after `edit` changed its result: text from a hostile sweep for the readers.
inline void add_failed_trial(Store& store, const std::string& name, const std::string& reason,
                             const std::string& stderr_tail, int pending = 1,
                             const std::function<void(TrialResult&)>& edit = {}) {
    const SweepId sweep = store.open_sweep(sample_sweep(name), false).id;
    add_pending(store, sweep, 0, pending);
    auto claimed = store.claim_next_pending(sweep);
    TrialResult r = sample_result(claimed->config, 0);
    r.status = TrialStatus::failed;
    r.reason = reason;
    if (edit) edit(r);
    store.record_result(claimed->id, r, stderr_tail, now_timestamp(), now_timestamp());
}

}  // namespace tune::test
