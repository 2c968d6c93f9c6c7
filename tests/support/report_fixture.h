// Results databases for the report tests and benchmark, written through the
// Store API the way a sweep driver would: enumerate (invalid and pruned trials
// set aside with their reasons and estimates), claim, record. Every number is
// synthetic but shaped like a real sweep of a 7B model: memory grows with
// context and shrinks with ZeRO stage and checkpointing, throughput falls
// with checkpointing, the estimator is off by a few percent either way.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "store/store.h"

namespace tune::test {

struct FixtureSweep {
    std::string name = "h100-demo";
    std::string host = "gpu-node-01";
    std::string device = "NVIDIA H100 80GB HBM3";
    std::uint64_t device_memory = 80ull << 30;
    double speed = 1.0;  // throughput relative to the H100 sweep
    std::string model_name = "llama-7b";
    std::string reason_prefix;  // prepended to every reason (hostile text in the tests)
    std::string peak_phase = "lm-head-backward";
    std::size_t max_trials = 0;  // 0: the whole space
    bool big_space = false;      // every optimizer, precision, ... (14,400 configurations)
};

namespace fixture_detail {

// Deterministic noise in [-1, 1) from a trial's position in the space.
inline double noise(std::uint64_t seed) {
    seed ^= seed >> 33;
    seed *= 0xff51afd7ed558ccdULL;
    seed ^= seed >> 33;
    seed *= 0xc4ceb9fe1a85ec53ULL;
    seed ^= seed >> 33;
    return static_cast<double>(seed % 20000) / 10000.0 - 1.0;
}

inline ModelSpec llama7b(const std::string& name) {
    ModelSpec m;
    m.name = name;
    m.vocab = 32000;
    m.hidden = 4096;
    m.layers = 32;
    m.heads = 32;
    m.kv_heads = 32;
    m.ffn = 11008;
    m.max_context = 8192;
    return m;
}

inline std::vector<TrialConfig> space(const FixtureSweep& f) {
    std::vector<Optimizer> optimizers{Optimizer::adamw, Optimizer::lion, Optimizer::adam8bit, Optimizer::lomo};
    std::vector<Precision> precisions{Precision::bf16_mixed};
    std::vector<std::uint32_t> accums{1, 4}, contexts{1024, 2048, 4096}, batches{1, 2};
    std::vector<Checkpointing> ckpts{Checkpointing::none, Checkpointing::full};
    if (f.big_space) {
        optimizers.assign(kOptimizers.begin(), kOptimizers.end());
        precisions.assign(kPrecisions.begin(), kPrecisions.end());
        accums = {1, 4, 16};
        contexts = {512, 1024, 2048, 4096, 8192};
        batches = {1, 2, 4, 8};
        ckpts.assign(kCheckpointings.begin(), kCheckpointings.end());
    }
    std::vector<TrialConfig> out;
    for (auto o : optimizers)
        for (auto p : precisions)
            for (std::uint32_t z = 0; z < 4; ++z)
                for (auto ga : accums)
                    for (auto ck : ckpts)
                        for (auto ctx : contexts)
                            for (auto mb : batches) {
                                TrialConfig c;
                                c.model = llama7b(f.model_name);
                                c.optimizer = o;
                                c.precision = p;
                                c.zero_stage = z;
                                c.grad_accum = ga;
                                c.checkpointing = ck;
                                c.context = ctx;
                                c.micro_batch = mb;
                                c.world_size = 8;
                                c.memory_limit = f.device_memory;
                                out.push_back(c);
                            }
    if (f.max_trials && out.size() > f.max_trials) out.resize(f.max_trials);
    return out;
}

inline double optimizer_state_bytes(Optimizer o, Precision p) {
    switch (o) {
        case Optimizer::adamw:
            return 2.0 * state_bytes(p);
        case Optimizer::lion:
            return 1.0 * state_bytes(p);
        case Optimizer::adam8bit:
            return 2.0;
        case Optimizer::adafactor:
            return 0.05;
        case Optimizer::lomo:
            return 0.0;
    }
    return 0;
}

inline Estimate estimate(const TrialConfig& c) {
    const double n = static_cast<double>(c.model.param_count());
    const double w = c.world_size;
    const double wb = weight_bytes(c.precision);
    const double act_per_token = c.checkpointing == Checkpointing::none        ? 34.0
                                 : c.checkpointing == Checkpointing::selective ? 20.0
                                                                               : 2.0;
    const double tokens = double(c.micro_batch) * c.context;
    Estimate e;
    MemoryBreakdown& m = e.memory;
    m[Component::params] = static_cast<std::uint64_t>(n * wb / (c.zero_stage >= 3 ? w : 1));
    m[Component::grads] =
        c.optimizer == Optimizer::lomo ? 0 : static_cast<std::uint64_t>(n * wb / (c.zero_stage >= 2 ? w : 1));
    m[Component::master] =
        has_master_weights(c.precision) ? static_cast<std::uint64_t>(n * 4 / (c.zero_stage >= 1 ? w : 1)) : 0;
    m[Component::optim] =
        static_cast<std::uint64_t>(n * optimizer_state_bytes(c.optimizer, c.precision) / (c.zero_stage >= 1 ? w : 1));
    m[Component::activations] =
        static_cast<std::uint64_t>(tokens * double(c.model.hidden) * double(c.model.layers) * act_per_token / 8);
    m[Component::logits] = static_cast<std::uint64_t>(tokens * double(c.model.vocab) * 4);
    m[Component::workspace] = 256ull << 20;
    m[Component::comm] = c.zero_stage > 0 ? 512ull << 20 : 128ull << 20;
    m[Component::overhead] = 900ull << 20;
    m.peak = m.total();
    m.peak_phase = "lm-head-backward";
    const double ckpt_speed = c.checkpointing == Checkpointing::none        ? 1.0
                              : c.checkpointing == Checkpointing::selective ? 0.9
                                                                            : 0.74;
    e.tokens_per_s = 2600.0 * w * ckpt_speed * (1.0 - 0.25 / c.micro_batch) * (1.0 - 0.04 * c.zero_stage) *
                     (1.0 - 0.05 / c.grad_accum) * (c.precision == Precision::fp32 ? 0.3 : 1.0);
    e.step_s = tokens * c.grad_accum * w / e.tokens_per_s;
    e.mfu = e.tokens_per_s * 6 * n / (w * 989e12);
    e.fits = m.peak <= c.memory_limit;
    return e;
}

inline std::uint64_t seed_of(const TrialConfig& c) {
    return (std::uint64_t(c.optimizer) * 131 + std::uint64_t(c.precision) * 31 + c.zero_stage) * 1000003ULL +
           std::uint64_t(c.grad_accum) * 7919 + std::uint64_t(c.checkpointing) * 104729 + c.context * 13ULL +
           c.micro_batch;
}

inline TrialResult outcome(const TrialConfig& c, const FixtureSweep& f, std::size_t ordinal) {
    const Estimate e = estimate(c);
    const std::uint64_t seed = seed_of(c);
    TrialResult r;
    r.config = c;
    r.estimate = e;
    for (Component comp : kComponents)
        r.memory[comp] = static_cast<std::uint64_t>(static_cast<double>(e.memory[comp]) *
                                                    (1.0 + 0.12 * noise(seed + std::uint64_t(comp))));
    r.memory.peak = r.memory.total();
    r.memory.peak_phase = f.peak_phase;
    if (ordinal % 23 == 7) {
        r.status = TrialStatus::failed;
        r.reason = f.reason_prefix + "NCCL error: unhandled system error (rank 3)";
        return r;
    }
    if (ordinal % 41 == 11) {
        r.status = TrialStatus::timeout;
        r.reason = f.reason_prefix + "no result after 10m";
        return r;
    }
    if (r.memory.peak > c.memory_limit) {
        r.status = TrialStatus::oom;
        r.reason = f.reason_prefix + "out of memory allocating activations";
        r.oom_requested = r.memory.peak - c.memory_limit + (64ull << 20);
        r.oom_live = c.memory_limit - (64ull << 20);
        r.memory = MemoryBreakdown{};
        return r;
    }
    r.status = TrialStatus::ok;
    r.tokens_per_s = e.tokens_per_s * f.speed * (1.0 + 0.10 * noise(seed ^ 0x5bd1e995));
    r.mfu = e.mfu * r.tokens_per_s / e.tokens_per_s;
    const double step_ms =
        static_cast<double>(c.micro_batch) * c.context * c.grad_accum * c.world_size / r.tokens_per_s * 1000;
    for (std::uint32_t s = 0; s < c.steps; ++s) {
        r.step_ms.push_back(step_ms * (s < c.warmup ? 1.6 : 1.0 + 0.01 * noise(seed + s)));
        r.losses.push_back(10.4 - 0.05 * s);
    }
    r.rank_peaks.assign(c.world_size, r.memory.peak);
    r.comm_bytes = 1ull << 30;
    r.comm_s = 0.01;
    return r;
}

inline NewTrial enumerated(const TrialConfig& c, const FixtureSweep& f) {
    NewTrial t;
    t.config = c;
    t.estimate = estimate(c);
    if (c.optimizer == Optimizer::lomo && c.grad_accum > 1) {
        t.status = TrialStatus::invalid;
        t.reason = f.reason_prefix + "lomo applies each gradient as it is produced, so grad_accum must be 1";
        t.estimate.reset();
    } else if (t.estimate->memory.peak > c.memory_limit * 11 / 10) {
        t.status = TrialStatus::pruned;
        t.reason = f.reason_prefix + "estimated peak exceeds the memory limit";
    }
    t.priority = t.estimate ? t.estimate->step_s : 0;
    return t;
}

}  // namespace fixture_detail

// Adds one finished sweep to the database at `db`.
inline void add_fixture_sweep(Store& db, const FixtureSweep& f) {
    using namespace fixture_detail;
    SweepRecord rec;
    rec.name = f.name;
    rec.spec_text = "name = \"" + f.name + "\"\n";
    rec.spec_hash = stable_hash(rec.spec_text);
    rec.created_at = Timestamp{std::chrono::milliseconds{1795000000000}};
    rec.host = f.host;
    rec.device = {f.device, 8, f.device_memory};
    rec.backend = "cuda";
    rec.software = {"0.1.0", "abcdef123456", "12.4", "2.21.5", "550.54.15"};
    const SweepId id = db.open_sweep(rec, false).id;

    std::vector<NewTrial> trials;
    for (const auto& c : space(f)) trials.push_back(enumerated(c, f));
    db.add_trials(id, trials);
    const Timestamp start = rec.created_at;
    std::size_t ordinal = 0;
    while (auto claimed = db.claim_next_pending(id)) {
        const TrialResult r = outcome(claimed->config, f, ordinal++);
        db.record_result(claimed->id, r, r.status == TrialStatus::ok ? "" : f.reason_prefix + "stderr tail", start,
                         start + std::chrono::seconds{40});
    }
}

// The standard fixture: an H100 sweep, an A100 sweep of the same space (for
// comparisons), and one whose every text field is hostile markup.
inline void write_report_fixture(const std::string& path) {
    Store db(path, Store::Mode::read_write);
    add_fixture_sweep(db, FixtureSweep{});
    FixtureSweep a100;
    a100.name = "a100-demo";
    a100.host = "gpu-node-07";
    a100.device = "NVIDIA A100-SXM4-40GB";
    a100.device_memory = 40ull << 30;
    a100.speed = 0.42;
    add_fixture_sweep(db, a100);
    FixtureSweep hostile;
    hostile.name = "<script>alert(1)</script>";
    hostile.host = "\"><img src=x onerror=alert(2)>";
    hostile.device = "</script><script>alert(3)</script>";
    hostile.model_name = "<svg onload=alert(4)>";
    hostile.reason_prefix = "<b>bold</b> & \xE2\x80\xA8 \xFF </script> ";
    hostile.peak_phase = "<iframe src=javascript:alert(5)>";
    hostile.max_trials = 60;
    add_fixture_sweep(db, hostile);
}

}  // namespace tune::test
