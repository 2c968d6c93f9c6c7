// Helpers for the trainer tests: small configurations, fixed token streams
// and in-process trainers on the CPU backend.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/config.h"
#include "core/presets.h"
#include "kernels/cpu/cpu_backend.h"
#include "train/comm/comm.h"
#include "train/io/data.h"
#include "train/trainer.h"
#include "train/trial.h"

namespace tune::test {

// A Llama small enough for finite differences: two layers, grouped KV heads.
inline ModelSpec micro_model() { return ModelSpec{"micro", 32, 16, 2, 4, 2, 24, 64, 1e-5, 10000.0}; }

// The micro model widened so q, k, v and gate, up each fill whole 256-element
// slots of the layout: the layer runs them fused (core/projection_fusion.h).
inline ModelSpec fusable_model() {
    ModelSpec m = micro_model();
    m.name = "fusable";
    m.hidden = 32, m.ffn = 32;
    return m;
}

// The micro model with every variant the trainer runs beyond Llama's shape:
// head_dim 6 apart from hidden/heads (4), biases on every linear, Qwen3's q/k
// norms, tied embeddings, and llama3 rope_scaling whose bands all fall within
// its three RoPE pairs (wavelengths 6, 135 and 2900 against 64 and 256).
inline ModelSpec feature_model() {
    ModelSpec m = micro_model();
    m.name = "features";
    m.head_dim_setting = 6;
    m.qkv_bias = m.o_bias = m.mlp_bias = true;
    m.qk_norm = true;
    m.tied_embeddings = true;
    m.rope_scaling = RopeScaling{"llama3", 4.0, 1.0, 4.0, 256};
    return m;
}

inline TrialConfig trainer_config(const ModelSpec& model, Optimizer opt = Optimizer::adamw,
                                  Precision prec = Precision::fp32) {
    TrialConfig c;
    c.model = model;
    c.optimizer = opt;
    c.precision = prec;
    c.micro_batch = 2;
    c.context = 8;
    c.clip = 0;
    c.lr = 1e-3;
    c.steps = 1;
    c.warmup = 0;
    return c;
}

// The same window for every micro-batch, so repeated evaluations see the same data.
class FixedTokens final : public train::TokenSource {
public:
    explicit FixedTokens(std::uint64_t vocab) : vocab_(vocab) {}
    void read(std::uint64_t, std::int32_t* out, std::int64_t count) const override {
        for (std::int64_t i = 0; i < count; ++i)
            out[i] = static_cast<std::int32_t>(
                (static_cast<std::uint64_t>(i) * 7 + 3 + static_cast<std::uint64_t>(i * i)) % vocab_);
    }

private:
    std::uint64_t vocab_;
};

// A backend, a comm and a trainer that live together.
struct TrainerRig {
    kernels::CpuBackend backend{kernels::CpuBackendOptions{1, 0}};
    train::SingleRankComm comm;
    std::unique_ptr<train::TokenSource> tokens;
    std::unique_ptr<train::Trainer> trainer;

    TrainerRig(const TrialConfig& c, std::unique_ptr<train::TokenSource> source,
               const train::HostParams* init = nullptr, const train::HostParams* adapters = nullptr)
        : tokens(std::move(source)) {
        trainer = std::make_unique<train::Trainer>(backend, comm, c, *tokens, init, adapters);
    }
};

// In-process trial options: no per-step log, one thread (memory agrees with an estimate for 1 thread).
inline train::TrialOptions quiet_trial() {
    train::TrialOptions o;
    o.log = nullptr;
    o.threads = 1;
    return o;
}

inline double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
    double most = 0;
    for (std::size_t i = 0; i < a.size(); ++i) most = std::max(most, std::abs(static_cast<double>(a[i]) - b[i]));
    return most;
}

inline double max_abs(const std::vector<float>& a) {
    double most = 0;
    for (float v : a) most = std::max(most, std::abs(static_cast<double>(v)));
    return most;
}

}  // namespace tune::test
