#include "core/config.h"

#include <initializer_list>

#include <fmt/format.h>

namespace tune {
namespace {

using nlohmann::json;

// Rejects keys a reader does not know, naming the object they appeared in.
void check_keys(const json& j, std::string_view what, std::initializer_list<std::string_view> known) {
    if (!j.is_object()) throw ConfigError(fmt::format("{}: expected a JSON object, got {}", what, j.type_name()));
    for (const auto& [key, value] : j.items()) {
        bool ok = false;
        for (auto k : known) ok = ok || k == key;
        if (!ok) throw ConfigError(fmt::format("{}: unknown key \"{}\"", what, key));
    }
}

template <typename T>
void read(const json& j, const char* key, T& out) {
    if (auto it = j.find(key); it != j.end() && !it->is_null()) {
        try {
            out = it->get<T>();
        } catch (const json::exception& e) {
            throw ConfigError(fmt::format("key \"{}\": {}", key, e.what()));
        }
    }
}

template <typename Enum>
void read_enum(const json& j, const char* key, Enum& out, std::optional<Enum> (*parse)(std::string_view)) {
    if (auto it = j.find(key); it != j.end()) {
        if (!it->is_string()) throw ConfigError(fmt::format("key \"{}\": expected a string", key));
        auto parsed = parse(it->get<std::string>());
        if (!parsed) throw ConfigError(fmt::format("key \"{}\": unknown value \"{}\"", key, it->get<std::string>()));
        out = *parsed;
    }
}

template <typename T>
void write_optional(json& j, const char* key, const std::optional<T>& value) {
    if (value) j[key] = *value;
}

}  // namespace

void to_json(json& j, const ModelSpec& m) {
    j = json{{"name", m.name},   {"vocab", m.vocab},       {"hidden", m.hidden},
             {"layers", m.layers}, {"heads", m.heads},     {"kv_heads", m.kv_heads},
             {"ffn", m.ffn},     {"max_context", m.max_context}, {"rms_norm_eps", m.rms_norm_eps},
             {"rope_theta", m.rope_theta}};
}

void from_json(const json& j, ModelSpec& m) {
    check_keys(j, "model",
               {"name", "vocab", "hidden", "layers", "heads", "kv_heads", "ffn", "max_context", "rms_norm_eps",
                "rope_theta"});
    read(j, "name", m.name);
    read(j, "vocab", m.vocab);
    read(j, "hidden", m.hidden);
    read(j, "layers", m.layers);
    read(j, "heads", m.heads);
    read(j, "kv_heads", m.kv_heads);
    read(j, "ffn", m.ffn);
    read(j, "max_context", m.max_context);
    read(j, "rms_norm_eps", m.rms_norm_eps);
    read(j, "rope_theta", m.rope_theta);
}

void to_json(json& j, const Hardware& h) {
    j = json{{"device", h.device},
             {"backend", to_string(h.backend)},
             {"memory_bytes", h.memory_bytes},
             {"peak_flops_half", h.peak_flops_half},
             {"peak_flops_fp32", h.peak_flops_fp32},
             {"hbm_bytes_per_s", h.hbm_bytes_per_s},
             {"intra_node_bytes_per_s", h.intra_node_bytes_per_s},
             {"inter_node_bytes_per_s", h.inter_node_bytes_per_s},
             {"runtime_overhead_bytes", h.runtime_overhead_bytes},
             {"gpus_per_node", h.gpus_per_node},
             {"nodes", h.nodes}};
}

void from_json(const json& j, Hardware& h) {
    check_keys(j, "hardware",
               {"device", "backend", "memory_bytes", "peak_flops_half", "peak_flops_fp32", "hbm_bytes_per_s",
                "intra_node_bytes_per_s", "inter_node_bytes_per_s", "runtime_overhead_bytes", "gpus_per_node",
                "nodes"});
    read(j, "device", h.device);
    read_enum(j, "backend", h.backend, parse_backend);
    read(j, "memory_bytes", h.memory_bytes);
    read(j, "peak_flops_half", h.peak_flops_half);
    read(j, "peak_flops_fp32", h.peak_flops_fp32);
    read(j, "hbm_bytes_per_s", h.hbm_bytes_per_s);
    read(j, "intra_node_bytes_per_s", h.intra_node_bytes_per_s);
    read(j, "inter_node_bytes_per_s", h.inter_node_bytes_per_s);
    read(j, "runtime_overhead_bytes", h.runtime_overhead_bytes);
    read(j, "gpus_per_node", h.gpus_per_node);
    read(j, "nodes", h.nodes);
}

void to_json(json& j, const TrialConfig& c) {
    j = json{{"model", c.model},
             {"optimizer", to_string(c.optimizer)},
             {"precision", to_string(c.precision)},
             {"zero_stage", c.zero_stage},
             {"grad_accum", c.grad_accum},
             {"micro_batch", c.micro_batch},
             {"context", c.context},
             {"checkpointing", to_string(c.checkpointing)},
             {"world_size", c.world_size},
             {"steps", c.steps},
             {"warmup", c.warmup},
             {"seed", c.seed},
             {"lr", c.lr},
             {"weight_decay", c.weight_decay},
             {"clip", c.clip},
             {"neftune_alpha", c.neftune_alpha},
             {"adam8bit_block", c.adam8bit_block},
             {"loss_scale_init", c.loss_scale_init},
             {"loss_scale_window", c.loss_scale_window},
             {"memory_limit", c.memory_limit}};
    write_optional(j, "beta1", c.beta1);
    write_optional(j, "beta2", c.beta2);
    write_optional(j, "eps", c.eps);
}

void from_json(const json& j, TrialConfig& c) {
    check_keys(j, "config",
               {"model", "optimizer", "precision", "zero_stage", "grad_accum", "micro_batch", "context",
                "checkpointing", "world_size", "steps", "warmup", "seed", "lr", "weight_decay", "clip",
                "neftune_alpha", "beta1", "beta2", "eps", "adam8bit_block", "loss_scale_init",
                "loss_scale_window", "memory_limit"});
    if (auto it = j.find("model"); it != j.end()) c.model = it->get<ModelSpec>();
    read_enum(j, "optimizer", c.optimizer, parse_optimizer);
    read_enum(j, "precision", c.precision, parse_precision);
    read(j, "zero_stage", c.zero_stage);
    read(j, "grad_accum", c.grad_accum);
    read(j, "micro_batch", c.micro_batch);
    read(j, "context", c.context);
    read_enum(j, "checkpointing", c.checkpointing, parse_checkpointing);
    read(j, "world_size", c.world_size);
    read(j, "steps", c.steps);
    read(j, "warmup", c.warmup);
    read(j, "seed", c.seed);
    read(j, "lr", c.lr);
    read(j, "weight_decay", c.weight_decay);
    read(j, "clip", c.clip);
    read(j, "neftune_alpha", c.neftune_alpha);
    if (j.contains("beta1") && !j["beta1"].is_null()) c.beta1 = j["beta1"].get<double>();
    if (j.contains("beta2") && !j["beta2"].is_null()) c.beta2 = j["beta2"].get<double>();
    if (j.contains("eps") && !j["eps"].is_null()) c.eps = j["eps"].get<double>();
    read(j, "adam8bit_block", c.adam8bit_block);
    read(j, "loss_scale_init", c.loss_scale_init);
    read(j, "loss_scale_window", c.loss_scale_window);
    read(j, "memory_limit", c.memory_limit);
}

void to_json(json& j, const MemoryBreakdown& m) {
    j = json::object();
    for (Component c : kComponents) j[std::string(to_string(c))] = m[c];
    j["peak"] = m.peak;
    j["peak_phase"] = m.peak_phase;
}

void from_json(const json& j, MemoryBreakdown& m) {
    check_keys(j, "memory",
               {"params", "master", "grads", "optim", "activations", "logits", "workspace", "comm", "overhead",
                "peak", "peak_phase"});
    for (Component c : kComponents) read(j, std::string(to_string(c)).c_str(), m[c]);
    read(j, "peak", m.peak);
    read(j, "peak_phase", m.peak_phase);
}

void to_json(json& j, const Estimate& e) {
    j = json{{"memory", e.memory},
             {"time", {{"step_s", e.step_s}, {"tokens_per_s", e.tokens_per_s}, {"mfu", e.mfu}}},
             {"fits", e.fits}};
}

void from_json(const json& j, Estimate& e) {
    check_keys(j, "estimate", {"memory", "time", "fits", "config"});
    if (auto it = j.find("memory"); it != j.end()) e.memory = it->get<MemoryBreakdown>();
    if (auto it = j.find("time"); it != j.end()) {
        check_keys(*it, "estimate.time", {"step_s", "tokens_per_s", "mfu"});
        read(*it, "step_s", e.step_s);
        read(*it, "tokens_per_s", e.tokens_per_s);
        read(*it, "mfu", e.mfu);
    }
    read(j, "fits", e.fits);
}

void to_json(json& j, const TrialResult& r) {
    j = json{{"status", to_string(r.status)},
             {"config", r.config},
             {"memory", r.memory},
             {"rank_peaks", r.rank_peaks},
             {"step_ms", r.step_ms},
             {"losses", r.losses},
             {"tokens_per_s", r.tokens_per_s},
             {"mfu", r.mfu},
             {"comm_bytes", r.comm_bytes},
             {"comm_s", r.comm_s}};
    if (!r.reason.empty()) j["reason"] = r.reason;
    if (r.estimate) j["estimate"] = *r.estimate;
    if (r.status == TrialStatus::oom) {
        j["oom_requested"] = r.oom_requested;
        j["oom_live"] = r.oom_live;
    }
}

void from_json(const json& j, TrialResult& r) {
    check_keys(j, "result",
               {"status", "reason", "config", "memory", "rank_peaks", "estimate", "step_ms", "losses",
                "tokens_per_s", "mfu", "comm_bytes", "comm_s", "oom_requested", "oom_live"});
    read_enum(j, "status", r.status, parse_status);
    read(j, "reason", r.reason);
    if (auto it = j.find("config"); it != j.end()) r.config = it->get<TrialConfig>();
    if (auto it = j.find("memory"); it != j.end()) r.memory = it->get<MemoryBreakdown>();
    read(j, "rank_peaks", r.rank_peaks);
    if (auto it = j.find("estimate"); it != j.end() && !it->is_null()) r.estimate = it->get<Estimate>();
    read(j, "step_ms", r.step_ms);
    read(j, "losses", r.losses);
    read(j, "tokens_per_s", r.tokens_per_s);
    read(j, "mfu", r.mfu);
    read(j, "comm_bytes", r.comm_bytes);
    read(j, "comm_s", r.comm_s);
    read(j, "oom_requested", r.oom_requested);
    read(j, "oom_live", r.oom_live);
}

std::string config_hash(const TrialConfig& c) { return stable_hash(json(c).dump()); }

std::string stable_hash(std::string_view bytes) {
    std::uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a 64 offset basis
    for (unsigned char byte : bytes) {
        h ^= byte;
        h *= 0x100000001b3ull;
    }
    return fmt::format("{:016x}", h);
}

std::string summary(const TrialConfig& c) {
    return fmt::format("{} {} z{} ga{} mb{} ctx{} ckpt={} x{}", to_string(c.optimizer), to_string(c.precision),
                       c.zero_stage, c.grad_accum, c.micro_batch, c.context, to_string(c.checkpointing),
                       c.world_size);
}

}  // namespace tune
