#include "train/io/hf_model.h"

#include <fstream>
#include <set>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "core/config_error.h"
#include "core/hf_config.h"
#include "train/io/safetensors.h"

namespace tune::train {

namespace {

std::string shape_text(const std::vector<std::int64_t>& s) { return fmt::format("[{}]", fmt::join(s, ", ")); }

std::vector<std::int64_t> hf_shape(const TensorView& t) {
    if (t.matrix()) return {t.rows, t.cols};
    return {t.cols};
}

std::string cannot(std::string_view what) {
    return fmt::format(
        "{}: tune's trainer cannot run this yet (the estimator counts it; estimate with "
        "`tune estimate`, or train with a framework: `tune best --emit ...`)",
        what);
}

}  // namespace

std::optional<std::string> trainer_unsupported(const TrialConfig& c) {
    const ModelSpec& m = c.model;
    const std::string& rope = m.rope_scaling.type;
    if (!rope.empty() && rope != "linear" && rope != "llama3")
        return cannot(fmt::format("rope_scaling type '{}' (the trainer runs linear and llama3)", rope));
    if (m.sliding_window != 0 && m.sliding_window < c.context)
        return cannot(fmt::format("sliding_window {} is shorter than the context {} (the trainer attends to all of it)",
                                  m.sliding_window, c.context));
    return std::nullopt;
}

namespace {

// The transformers class whose config reads the model back: Qwen3 for q/k
// norms, Qwen2 for q, k, v biases without an o bias, else Llama (which has
// attention_bias for all four and mlp_bias).
nlohmann::json architecture(const ModelSpec& m) {
    if (m.qk_norm)
        return {{"architectures", {"Qwen3ForCausalLM"}}, {"model_type", "qwen3"}, {"attention_bias", m.qkv_bias}};
    if (m.qkv_bias && !m.o_bias && !m.mlp_bias)
        return {{"architectures", {"Qwen2ForCausalLM"}}, {"model_type", "qwen2"}, {"use_sliding_window", false}};
    return {{"architectures", {"LlamaForCausalLM"}},
            {"model_type", "llama"},
            {"attention_bias", m.qkv_bias},
            {"mlp_bias", m.mlp_bias}};
}

nlohmann::json rope_scaling_json(const RopeScaling& r) {
    if (r.empty()) return nullptr;
    nlohmann::json j{{"rope_type", r.type}, {"factor", r.factor}};
    if (r.type == "llama3") {
        j["low_freq_factor"] = r.low_freq_factor;
        j["high_freq_factor"] = r.high_freq_factor;
        j["original_max_position_embeddings"] = r.original_context;
    }
    return j;
}

}  // namespace

ModelSpec load_hf_config(const std::filesystem::path& dir) {
    // One reader of config.json for sweeps and trials, with one set of checks on its values.
    ModelSpec m = tune::load_hf_config(dir / "config.json");
    m.name = "custom";
    return m;
}

HostParams load_hf_weights(const std::filesystem::path& dir, const ParamLayout& layout) {
    const std::filesystem::path file = dir / "model.safetensors";
    const SafetensorsFile st = SafetensorsFile::load(file);
    std::set<std::string> unused;
    for (const auto& [name, entry] : st.entries()) unused.insert(name);
    std::vector<std::string> missing, misshaped;
    HostParams host;
    for (std::size_t i = 0; i < layout.buffers(); ++i) {
        const FlatLayout& f = layout.flat(i);
        std::vector<float> buf(static_cast<std::size_t>(f.padded), 0.0f);
        for (std::size_t t = 0; t < f.tensors.size(); ++t) {
            const std::string name = tensor_name(layout, i, t);
            const auto it = st.entries().find(name);
            if (it == st.entries().end()) {
                missing.push_back(name);
                continue;
            }
            unused.erase(name);
            if (it->second.shape != hf_shape(f.tensors[t])) {
                misshaped.push_back(fmt::format("{} is {}, expected {}", name, shape_text(it->second.shape),
                                                shape_text(hf_shape(f.tensors[t]))));
                continue;
            }
            const std::vector<float> values = st.read_f32(name);
            std::copy(values.begin(), values.end(), buf.begin() + f.tensors[t].offset);
        }
        host.push_back(std::move(buf));
    }
    // Tied embeddings: transformers ties lm_head to the embedding on load and
    // ignores a stored copy, which some checkpoints keep.
    if (layout.head() == OuterTensor::embedding) unused.erase("lm_head.weight");
    std::vector<std::string> problems;
    if (!missing.empty()) problems.push_back(fmt::format("missing tensors: {}", fmt::join(missing, ", ")));
    if (!unused.empty()) problems.push_back(fmt::format("unexpected tensors: {}", fmt::join(unused, ", ")));
    if (!misshaped.empty()) problems.push_back(fmt::format("mis-shaped tensors: {}", fmt::join(misshaped, "; ")));
    if (!problems.empty()) throw ConfigError(file.string(), 0, 0, fmt::format("{}", fmt::join(problems, "; ")));
    return host;
}

void save_hf_model(const std::filesystem::path& dir, const ModelSpec& m, const ParamLayout& layout,
                   const HostParams& params) {
    std::filesystem::create_directories(dir);
    nlohmann::json config = architecture(m);
    config.update(nlohmann::json{{"hidden_size", m.hidden},
                                 {"intermediate_size", m.ffn},
                                 {"num_hidden_layers", m.layers},
                                 {"num_attention_heads", m.heads},
                                 {"num_key_value_heads", m.kv_heads},
                                 {"vocab_size", m.vocab},
                                 {"rms_norm_eps", m.rms_norm_eps},
                                 {"rope_theta", m.rope_theta},
                                 {"max_position_embeddings", m.max_context},
                                 {"head_dim", m.head_dim()},
                                 {"rope_scaling", rope_scaling_json(m.rope_scaling)},
                                 {"tie_word_embeddings", m.tied_embeddings}});
    std::ofstream(dir / "config.json") << config.dump(2) << "\n";
    std::vector<NamedTensor> tensors;
    for (std::size_t i = 0; i < layout.buffers(); ++i) {
        const FlatLayout& f = layout.flat(i);
        for (std::size_t t = 0; t < f.tensors.size(); ++t) {
            const TensorView& v = f.tensors[t];
            const auto begin = params[i].begin() + v.offset;
            tensors.push_back({tensor_name(layout, i, t), hf_shape(v), std::vector<float>(begin, begin + v.numel())});
        }
    }
    write_safetensors(dir / "model.safetensors", tensors);
}

}  // namespace tune::train
