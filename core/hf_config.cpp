// A Hugging Face config.json (Llama, Mistral, Qwen2, Qwen3) read into a ModelSpec,
// faithfully: every field that changes the parameters or the memory is read
// (head_dim, tie_word_embeddings, attention_bias, mlp_bias, sliding_window,
// rope_scaling, Qwen3's q/k norms), and one this reader does not know how to count is an error
// naming it, never silently ignored.
#include <array>
#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/hf_config.h"

#include "core/config_error.h"
#include "core/input_file.h"

namespace tune {
namespace {

// A config.json is a few kilobytes; anything near this is not one.
constexpr std::uint64_t kMaxConfigJsonBytes = 1024 * 1024;
// The same bound as a [model] dimension in a sweep file.
constexpr std::uint64_t kMaxDimension = std::uint64_t{1} << 40;

// Fields that change what is trained or its memory and that tune cannot count.
constexpr std::array<const char*, 6> kUncountable{"num_local_experts",           "num_experts",
                                                  "moe_intermediate_size",       "quantization_config",
                                                  "cross_attention_hidden_size", "num_experts_per_tok"};

class HfReader {
public:
    HfReader(std::string file, nlohmann::json j) : file_(std::move(file)), j_(std::move(j)) {}

    [[noreturn]] void fail(const std::string& message) const { throw ConfigError(file_, 0, 0, message); }

    bool has(const char* key) const { return j_.contains(key) && !j_[key].is_null(); }

    std::string text(const char* key, const char* fallback) const {
        if (!has(key)) return fallback;
        if (!j_[key].is_string()) fail(fmt::format("\"{}\" must be a string", key));
        return j_[key].get<std::string>();
    }

    bool flag(const char* key, bool fallback) const {
        if (!has(key)) return fallback;
        if (!j_[key].is_boolean()) fail(fmt::format("\"{}\" must be true or false", key));
        return j_[key].get<bool>();
    }

    // is_number_unsigned: a negative integer (hidden_size: -32) is not silently wrapped to 2^64 - 32.
    std::uint64_t need(const char* key) const {
        if (!has(key) || !j_[key].is_number_unsigned())
            fail(fmt::format("missing or non-integer \"{}\" (a LlamaConfig field)", key));
        const auto v = j_[key].get<std::uint64_t>();
        if (v == 0 || v > kMaxDimension)
            fail(fmt::format("\"{}\" is {}; it must be between 1 and {}", key, v, kMaxDimension));
        return v;
    }
    std::uint64_t optional(const char* key, std::uint64_t fallback) const { return has(key) ? need(key) : fallback; }

    // A positive, finite number below `below` (a string or NaN-like value is refused, not defaulted).
    double positive(const char* key, double fallback, double below) const {
        if (!has(key)) return fallback;
        if (!j_[key].is_number()) fail(fmt::format("\"{}\" must be a number", key));
        const double v = j_[key].get<double>();
        if (!std::isfinite(v) || v <= 0 || v >= below)
            fail(fmt::format("\"{}\" is {}; it must be a positive number below {:g}", key, v, below));
        return v;
    }

    const nlohmann::json& json() const { return j_; }

private:
    std::string file_;
    nlohmann::json j_;
};

// rope_scaling's type and the parameters transformers' modeling_rope_utils
// reads for it; the one rule set bounds them (core/validity).
RopeScaling rope_scaling_of(const HfReader& r) {
    RopeScaling out;
    if (!r.has("rope_scaling")) return out;
    const nlohmann::json& rs = r.json()["rope_scaling"];
    if (!rs.is_object())
        r.fail("\"rope_scaling\" must be an object such as {\"rope_type\": \"llama3\", \"factor\": 8}");
    out.type = "scaled";
    for (const char* key : {"rope_type", "type"})
        if (rs.contains(key) && rs[key].is_string()) out.type = rs[key].get<std::string>();
    if (out.type == "default") return RopeScaling{};
    auto number = [&](const char* key, double fallback) {
        if (!rs.contains(key) || rs[key].is_null()) return fallback;
        if (!rs[key].is_number()) r.fail(fmt::format("\"rope_scaling\": \"{}\" must be a number", key));
        return rs[key].get<double>();
    };
    out.factor = number("factor", 1.0);
    out.low_freq_factor = number("low_freq_factor", out.low_freq_factor);
    out.high_freq_factor = number("high_freq_factor", out.high_freq_factor);
    const double original = number("original_max_position_embeddings", static_cast<double>(out.original_context));
    if (!(original >= 1 && original <= 1e12 && original == std::floor(original)))
        r.fail(
            fmt::format("\"rope_scaling\": original_max_position_embeddings {} must be a positive integer", original));
    out.original_context = static_cast<std::uint64_t>(original);
    return out;
}

// The architecture's fixed choices: Qwen2 always has q, k, v biases and its window only when asked for.
// Qwen3 (modeling_qwen3.Qwen3Attention): q/k norms, attention_bias on q, k, v and o.
void read_architecture(const HfReader& r, const std::string& type, ModelSpec& m) {
    if (type == "qwen2" || type == "qwen3") {
        m.qk_norm = type == "qwen3";
        m.qkv_bias = type == "qwen2" || r.flag("attention_bias", false);
        m.o_bias = type == "qwen3" && m.qkv_bias;
        if (r.flag("use_sliding_window", false)) m.sliding_window = r.optional("sliding_window", 0);
        return;
    }
    const bool attention_bias = r.flag("attention_bias", false);
    m.qkv_bias = attention_bias;
    m.o_bias = attention_bias;
    m.mlp_bias = r.flag("mlp_bias", false);
    m.sliding_window = r.optional("sliding_window", 0);  // Mistral; null means full attention
}

std::string name_of(const HfReader& r, const std::string& type) {
    const std::string path = r.text("_name_or_path", "");
    return path.empty() ? type : path;
}

}  // namespace

ModelSpec load_hf_config(const std::filesystem::path& path) {
    const std::string file = path.string();
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(read_input_file(path, kMaxConfigJsonBytes, "config.json"));
    } catch (const nlohmann::json::exception& e) {  // syntax, and numbers beyond a double (1e400)
        throw ConfigError(file, 0, 0, fmt::format("not valid JSON: {}", e.what()));
    }
    if (!j.is_object()) throw ConfigError(file, 0, 0, "expected a JSON object (a Hugging Face config.json)");
    const HfReader r(file, std::move(j));
    const std::string type = r.text("model_type", "llama");
    if (type != "llama" && type != "mistral" && type != "qwen2" && type != "qwen3")
        r.fail(fmt::format("model_type '{}' is not one tune reads (llama, mistral, qwen2, qwen3)", type));
    for (const char* key : kUncountable)
        if (r.has(key)) r.fail(fmt::format("\"{}\" is not supported: tune cannot count its parameters or memory", key));

    ModelSpec m;
    m.name = name_of(r, type);
    m.vocab = r.need("vocab_size");
    m.hidden = r.need("hidden_size");
    m.layers = r.need("num_hidden_layers");
    m.heads = r.need("num_attention_heads");
    m.kv_heads = r.optional("num_key_value_heads", m.heads);
    m.ffn = r.need("intermediate_size");
    m.max_context = r.optional("max_position_embeddings", 4096);
    m.rms_norm_eps = r.positive("rms_norm_eps", 1e-6, 1.0);
    m.rope_theta = r.positive("rope_theta", m.rope_theta, 1e12);
    const std::uint64_t head_dim = r.optional("head_dim", 0);
    if (head_dim != 0 && !(m.hidden % m.heads == 0 && head_dim == m.hidden / m.heads)) m.head_dim_setting = head_dim;
    m.tied_embeddings = r.flag("tie_word_embeddings", false);
    m.rope_scaling = rope_scaling_of(r);
    read_architecture(r, type, m);
    if ((m.head_dim_setting == 0 && m.hidden % m.heads != 0) || m.heads % m.kv_heads != 0 || m.head_dim() % 2 != 0)
        r.fail(
            fmt::format("num_attention_heads ({}) must divide hidden_size ({}) into an even head dimension (or "
                        "head_dim must be given and even), and num_key_value_heads ({}) must divide "
                        "num_attention_heads",
                        m.heads, m.hidden, m.kv_heads));
    return m;
}

}  // namespace tune
