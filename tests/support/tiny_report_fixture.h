// A results database shaped like the CPU demo's: the tiny model (a few MiB per
// rank, about 0.3M parameters), with the estimator's own numbers. Some trials
// were measured exactly as estimated (the CPU backend's memory matches to the
// byte), some a few percent off, one failed with a long message, pure bf16 runs
// fastest, and the longest context is not measured yet (predicted only).
#pragma once

#include <string>
#include <vector>

#include "core/presets.h"
#include "core/units.h"
#include "estimate/estimate.h"
#include "store/store.h"

namespace tune::test {

inline constexpr std::uint64_t kTinyLimit = 64 * MiB;
inline constexpr std::uint32_t kTinyPredictedContext = 256;

inline std::vector<TrialConfig> tiny_space(std::uint32_t context) {
    std::vector<TrialConfig> out;
    for (Optimizer o : {Optimizer::adamw, Optimizer::lion})
        for (Precision p : {Precision::fp32, Precision::bf16_mixed, Precision::bf16})
            for (std::uint32_t z : {0u, 1u}) {
                TrialConfig c;
                c.model = *find_model("tiny");
                c.optimizer = o;
                c.precision = p;
                c.zero_stage = z;
                c.context = context;
                c.micro_batch = 2;
                c.world_size = 2;
                c.memory_limit = kTinyLimit;
                out.push_back(c);
            }
    return out;
}

inline NewTrial tiny_enumerated(const TrialConfig& c) {
    Hardware hw = *find_device("cpu");
    hw.memory_bytes = kTinyLimit;
    NewTrial t;
    t.config = c;
    t.estimate = estimate(c, hw);
    t.priority = t.estimate->step_s;
    return t;
}

inline const std::string& tiny_long_reason() {
    static const std::string reason =
        "out of memory: " + std::string(40, 'x') + " " + std::string(600, 'y') + " the end of a very long reason";
    return reason;
}

// `baseline`: the process's own memory a real CPU trial measures beside its state (the overhead
// component; the estimator's default leaves it out).
inline TrialResult tiny_outcome(const TrialConfig& c, Estimate e, std::size_t ordinal, std::uint64_t baseline = 0) {
    e.memory[Component::overhead] += baseline;
    e.memory.peak += baseline;
    TrialResult r;
    r.config = c;
    r.estimate = e;
    if (ordinal == 3) {
        r.status = TrialStatus::failed;
        r.reason = tiny_long_reason();
        return r;
    }
    r.status = TrialStatus::ok;
    r.memory = e.memory;  // exact, as the CPU backend measures
    if (ordinal % 2 == 1) {
        for (Component comp : kComponents) r.memory[comp] = r.memory[comp] / 100 * 104;
        r.memory.peak = r.memory.peak / 100 * 104;
    }
    r.tokens_per_s = e.tokens_per_s * (c.precision == Precision::bf16 ? 1.6 : 1.0) * (1.0 + 0.01 * double(ordinal % 5));
    r.mfu = e.mfu;
    for (std::uint32_t s = 0; s < c.steps; ++s) r.step_ms.push_back(e.step_s * 1000);
    r.rank_peaks.assign(c.world_size, r.memory.peak);
    r.real_peak = r.memory.peak;
    return r;
}

inline void add_tiny_sweep(Store& db, const std::string& name = "tiny-demo", std::uint64_t baseline = 0) {
    SweepRecord rec;
    rec.name = name;
    rec.spec_text = "name = \"" + name + "\"\n";
    rec.spec_hash = stable_hash(rec.spec_text);
    rec.created_at = Timestamp{std::chrono::milliseconds{1795000000000}};
    rec.host = "cpu-box";
    rec.device = {"cpu", 2, kTinyLimit};
    rec.backend = "cpu";
    rec.software = {"0.1.0", "abcdef123456", "", "", ""};
    const SweepId id = db.open_sweep(rec, false).id;
    std::vector<NewTrial> measured;
    for (std::uint32_t context : {64u, 128u})
        for (const auto& c : tiny_space(context)) measured.push_back(tiny_enumerated(c));
    db.add_trials(id, measured);
    std::size_t ordinal = 0;
    while (auto claimed = db.claim_next_pending(id)) {
        const TrialResult r =
            tiny_outcome(claimed->config, *tiny_enumerated(claimed->config).estimate, ordinal++, baseline);
        db.record_result(claimed->id, r, "", rec.created_at, rec.created_at + std::chrono::seconds{5});
    }
    std::vector<NewTrial> predicted;  // enumerated after the others finished: still pending
    for (const auto& c : tiny_space(kTinyPredictedContext)) predicted.push_back(tiny_enumerated(c));
    db.add_trials(id, predicted);
}

inline std::string tiny_fixture_db(const std::filesystem::path& dir, std::uint64_t baseline = 0) {
    const std::string path = (dir / "tiny.db").string();
    Store db(path, Store::Mode::read_write);
    add_tiny_sweep(db, "tiny-demo", baseline);
    return path;
}

}  // namespace tune::test
