#include "core/config.h"

#include <algorithm>
#include <initializer_list>

#include <fmt/format.h>

#include "core/dimensions.h"

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

// An object as to_json writes it; a string is the form databases kept before
// its parameters were stored ("llama3 factor 8"), which only names the type.
void read_rope_scaling(const json& j, RopeScaling& r) {
    const auto it = j.find("rope_scaling");
    if (it == j.end() || it->is_null()) return;
    if (it->is_string()) {
        r.type = it->get<std::string>();
        return;
    }
    check_keys(*it, "rope_scaling", {"type", "factor", "low_freq_factor", "high_freq_factor", "original_context"});
    read(*it, "type", r.type);
    read(*it, "factor", r.factor);
    read(*it, "low_freq_factor", r.low_freq_factor);
    read(*it, "high_freq_factor", r.high_freq_factor);
    read(*it, "original_context", r.original_context);
}

template <typename T>
void write_optional(json& j, const char* key, const std::optional<T>& value) {
    if (value) j[key] = *value;
}

}  // namespace

std::string to_string(const RopeScaling& r) {
    if (r.empty()) return {};
    if (r.type == "llama3")
        return fmt::format("llama3 factor {:g} (low {:g}, high {:g}, original context {})", r.factor, r.low_freq_factor,
                           r.high_freq_factor, r.original_context);
    return fmt::format("{} factor {:g}", r.type, r.factor);
}

void to_json(json& j, const ModelSpec& m) {
    j = json{{"name", m.name},
             {"vocab", m.vocab},
             {"hidden", m.hidden},
             {"layers", m.layers},
             {"heads", m.heads},
             {"kv_heads", m.kv_heads},
             {"ffn", m.ffn},
             {"max_context", m.max_context},
             {"rms_norm_eps", m.rms_norm_eps},
             {"rope_theta", m.rope_theta}};
    // Written only when set, so every configuration stored before these existed keeps its hash.
    if (m.head_dim_setting) j["head_dim"] = m.head_dim_setting;
    if (m.tied_embeddings) j["tied_embeddings"] = true;
    if (m.qkv_bias) j["qkv_bias"] = true;
    if (m.o_bias) j["o_bias"] = true;
    if (m.mlp_bias) j["mlp_bias"] = true;
    if (m.sliding_window) j["sliding_window"] = m.sliding_window;
    if (m.qk_norm) j["qk_norm"] = true;
    if (!m.rope_scaling.empty())
        j["rope_scaling"] = json{{"type", m.rope_scaling.type},
                                 {"factor", m.rope_scaling.factor},
                                 {"low_freq_factor", m.rope_scaling.low_freq_factor},
                                 {"high_freq_factor", m.rope_scaling.high_freq_factor},
                                 {"original_context", m.rope_scaling.original_context}};
}

void from_json(const json& j, ModelSpec& m) {
    check_keys(
        j, "model",
        {"name", "vocab", "hidden", "layers", "heads", "kv_heads", "ffn", "max_context", "rms_norm_eps", "rope_theta",
         "head_dim", "tied_embeddings", "qkv_bias", "o_bias", "mlp_bias", "sliding_window", "rope_scaling", "qk_norm"});
    read(j, "head_dim", m.head_dim_setting);
    read(j, "tied_embeddings", m.tied_embeddings);
    read(j, "qkv_bias", m.qkv_bias);
    read(j, "o_bias", m.o_bias);
    read(j, "mlp_bias", m.mlp_bias);
    read(j, "sliding_window", m.sliding_window);
    read(j, "qk_norm", m.qk_norm);
    read_rope_scaling(j, m.rope_scaling);
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
             {"training_efficiency", h.training_efficiency},
             {"gpus_per_node", h.gpus_per_node},
             {"nodes", h.nodes}};
    if (h.host_link_bytes_per_s > 0) j["host_link_bytes_per_s"] = h.host_link_bytes_per_s;
    if (h.host_memory_bytes_per_s > 0) j["host_memory_bytes_per_s"] = h.host_memory_bytes_per_s;
}

void from_json(const json& j, Hardware& h) {
    check_keys(j, "hardware",
               {"device", "backend", "memory_bytes", "peak_flops_half", "peak_flops_fp32", "hbm_bytes_per_s",
                "intra_node_bytes_per_s", "inter_node_bytes_per_s", "runtime_overhead_bytes", "training_efficiency",
                "gpus_per_node", "nodes", "host_link_bytes_per_s", "host_memory_bytes_per_s"});
    read(j, "device", h.device);
    read_enum(j, "backend", h.backend, parse_backend);
    read(j, "memory_bytes", h.memory_bytes);
    read(j, "peak_flops_half", h.peak_flops_half);
    read(j, "peak_flops_fp32", h.peak_flops_fp32);
    read(j, "hbm_bytes_per_s", h.hbm_bytes_per_s);
    read(j, "intra_node_bytes_per_s", h.intra_node_bytes_per_s);
    read(j, "inter_node_bytes_per_s", h.inter_node_bytes_per_s);
    read(j, "runtime_overhead_bytes", h.runtime_overhead_bytes);
    read(j, "training_efficiency", h.training_efficiency);
    read(j, "gpus_per_node", h.gpus_per_node);
    read(j, "nodes", h.nodes);
    read(j, "host_link_bytes_per_s", h.host_link_bytes_per_s);
    read(j, "host_memory_bytes_per_s", h.host_memory_bytes_per_s);
}

namespace {

// The search dimensions come from the dimension table; the rest are the trial's settings.
constexpr std::array<std::string_view, 16> kSettingKeys{
    "model",     "world_size",   "steps",          "warmup",          "seed",
    "lr",        "weight_decay", "clip",           "neftune_alpha",   "beta1",
    "beta2",     "eps",          "adam8bit_block", "loss_scale_init", "loss_scale_window",
    "lora_alpha"};

void write_dimensions(json& j, const TrialConfig& c) {
    for (const Dimension& d : dimensions()) {
        if (d.legacy && d.get(c) == *d.legacy) continue;
        if (d.is_enum())
            j[std::string(d.name)] = d.text(c);
        else
            j[std::string(d.name)] = d.get(c);
    }
}

void read_dimensions(const json& j, TrialConfig& c) {
    for (const Dimension& d : dimensions()) {
        const auto it = j.find(d.name);
        if (it == j.end() || it->is_null()) {
            if (d.legacy) d.set(c, *d.legacy);
            continue;
        }
        std::optional<DimValue> value;
        if (d.is_enum() && it->is_string())
            value = d.parse(it->get<std::string>());
        else if (!d.is_enum() && it->is_number_unsigned())
            value = d.parse(std::to_string(it->get<std::uint64_t>()));
        if (value) {
            d.set(c, *value);
            continue;
        }
        if (d.is_enum() && it->is_string())
            throw ConfigError(fmt::format("key \"{}\": unknown value \"{}\" (expected {})", d.name,
                                          it->get<std::string>(), d.allowed()));
        throw ConfigError(fmt::format("key \"{}\": expected {}, got {}", d.name, d.allowed(), it->dump()));
    }
}

}  // namespace

void to_json(json& j, const TrialConfig& c) {
    j = json{{"model", c.model},
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
    write_dimensions(j, c);
    write_optional(j, "beta1", c.beta1);
    write_optional(j, "beta2", c.beta2);
    write_optional(j, "eps", c.eps);
    write_optional(j, "lora_alpha", c.lora_alpha);
}

void from_json(const json& j, TrialConfig& c) {
    if (!j.is_object()) throw ConfigError(fmt::format("config: expected a JSON object, got {}", j.type_name()));
    for (const auto& [key, value] : j.items()) {
        const bool known = find_dimension(key) || key == "memory_limit" ||
                           std::find(kSettingKeys.begin(), kSettingKeys.end(), key) != kSettingKeys.end();
        if (!known) throw ConfigError(fmt::format("config: unknown key \"{}\"", key));
    }
    if (auto it = j.find("model"); it != j.end()) c.model = it->get<ModelSpec>();
    read_dimensions(j, c);
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
    if (j.contains("lora_alpha") && !j["lora_alpha"].is_null()) c.lora_alpha = j["lora_alpha"].get<double>();
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
               {"params", "master", "grads", "optim", "activations", "logits", "workspace", "comm", "overhead", "peak",
                "peak_phase"});
    for (Component c : kComponents) read(j, std::string(to_string(c)).c_str(), m[c]);
    read(j, "peak", m.peak);
    read(j, "peak_phase", m.peak_phase);
}

void to_json(json& j, const StageMemory& s) {
    j = json{{"stage", s.stage}, {"rank", s.rank}, {"layers", s.layers}, {"memory", s.memory}};
}

void from_json(const json& j, StageMemory& s) {
    check_keys(j, "estimate stage", {"stage", "rank", "layers", "memory"});
    read(j, "stage", s.stage);
    read(j, "rank", s.rank);
    read(j, "layers", s.layers);
    if (auto it = j.find("memory"); it != j.end()) s.memory = it->get<MemoryBreakdown>();
}

void to_json(json& j, const Estimate& e) {
    j = json{{"memory", e.memory},
             {"time", {{"step_s", e.step_s}, {"tokens_per_s", e.tokens_per_s}, {"mfu", e.mfu}}},
             {"fits", e.fits}};
    if (e.speed_reference_s > 0) j["time"]["speed_reference_s"] = e.speed_reference_s;
    if (e.pace_exponent != 1) j["time"]["pace_exponent"] = e.pace_exponent;
    if (e.pipeline_bubble > 0) j["time"]["pipeline_bubble"] = e.pipeline_bubble;
    if (e.host_memory.peak > 0) {
        j["host_memory"] = e.host_memory;
        j["host_node_bytes"] = e.host_node_bytes;
    }
    if (!e.limit.empty()) j["limit"] = e.limit;
    if (!e.stages.empty()) j["stages"] = e.stages;
}

void from_json(const json& j, Estimate& e) {
    check_keys(j, "estimate",
               {"memory", "time", "fits", "config", "host_memory", "host_node_bytes", "limit", "stages"});
    if (auto it = j.find("stages"); it != j.end()) e.stages = it->get<std::vector<StageMemory>>();
    if (auto it = j.find("memory"); it != j.end()) e.memory = it->get<MemoryBreakdown>();
    if (auto it = j.find("host_memory"); it != j.end()) e.host_memory = it->get<MemoryBreakdown>();
    read(j, "host_node_bytes", e.host_node_bytes);
    read(j, "limit", e.limit);
    if (auto it = j.find("time"); it != j.end()) {
        check_keys(*it, "estimate.time",
                   {"step_s", "tokens_per_s", "mfu", "speed_reference_s", "pace_exponent", "pipeline_bubble"});
        read(*it, "pipeline_bubble", e.pipeline_bubble);
        read(*it, "step_s", e.step_s);
        read(*it, "speed_reference_s", e.speed_reference_s);
        read(*it, "pace_exponent", e.pace_exponent);
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
    if (r.step_stats.count > 0) j["step_stats"] = r.step_stats;
    if (r.speed_reference_s > 0) j["speed_reference_s"] = r.speed_reference_s;
    if (!r.attention.empty()) j["attention"] = r.attention;
    if (!r.rank_host_peaks.empty()) {
        j["host_memory"] = r.host_memory;
        j["rank_host_peaks"] = r.rank_host_peaks;
    }
    j.update(machine_memory_json(r));
}

void from_json(const json& j, TrialResult& r) {
    check_keys(j, "result", {"status",         "reason",
                             "config",         "memory",
                             "rank_peaks",     "estimate",
                             "step_ms",        "losses",
                             "tokens_per_s",   "mfu",
                             "comm_bytes",     "comm_s",
                             "oom_requested",  "oom_live",
                             "real_peak",      "baseline",
                             "untracked",      "rank_real_peaks",
                             "rank_baselines", "rank_untracked",
                             "step_stats",     "speed_reference_s",
                             "attention",      "host_memory",
                             "rank_host_peaks"});
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
    read(j, "real_peak", r.real_peak);
    read(j, "baseline", r.baseline);
    read(j, "untracked", r.untracked);
    read(j, "rank_real_peaks", r.rank_real_peaks);
    read(j, "rank_baselines", r.rank_baselines);
    read(j, "rank_untracked", r.rank_untracked);
    read(j, "step_stats", r.step_stats);
    read(j, "speed_reference_s", r.speed_reference_s);
    read(j, "attention", r.attention);
    if (auto it = j.find("host_memory"); it != j.end()) r.host_memory = it->get<MemoryBreakdown>();
    read(j, "rank_host_peaks", r.rank_host_peaks);
}

json machine_memory_json(const TrialResult& r) {
    if (r.real_peak == 0) return json::object();
    return {{"real_peak", r.real_peak},           {"baseline", r.baseline},
            {"untracked", r.untracked},           {"rank_real_peaks", r.rank_real_peaks},
            {"rank_baselines", r.rank_baselines}, {"rank_untracked", r.rank_untracked}};
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
    std::string out;
    const TrialConfig defaults;
    for (const Dimension& d : dimensions()) {
        // Rows added later stay out at their default, so older summaries read as before.
        if (!d.applies_to(c)) continue;
        if (d.applies == nullptr && d.legacy && d.get(c) == d.get(defaults)) continue;
        out += fmt::format("{}{} ", d.prefix, d.text(c));
    }
    return out + fmt::format("x{}", c.world_size);
}

}  // namespace tune
