#include "harness/hf_model.h"

#include <fstream>
#include <set>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "harness/safetensors.h"

namespace tune::harness {

namespace {

std::string shape_text(const std::vector<std::int64_t>& s) { return fmt::format("[{}]", fmt::join(s, ", ")); }

std::vector<std::int64_t> hf_shape(const TensorView& t) {
    if (t.matrix()) return {t.rows, t.cols};
    return {t.cols};
}

template <class T>
T required(const nlohmann::json& j, const char* key, const std::filesystem::path& file) {
    if (!j.contains(key)) throw std::runtime_error(fmt::format("{}: missing \"{}\"", file.string(), key));
    try {
        return j.at(key).get<T>();
    } catch (const nlohmann::json::exception&) {
        throw std::runtime_error(fmt::format("{}: \"{}\" has the wrong type", file.string(), key));
    }
}

}  // namespace

ModelSpec load_hf_config(const std::filesystem::path& dir) {
    const std::filesystem::path file = dir / "config.json";
    std::ifstream in(file);
    if (!in) throw std::runtime_error(fmt::format("{}: cannot open", file.string()));
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
        throw std::runtime_error(fmt::format("{}: not JSON ({})", file.string(), e.what()));
    }
    ModelSpec m;
    m.name = "custom";
    m.hidden = required<std::uint64_t>(j, "hidden_size", file);
    m.ffn = required<std::uint64_t>(j, "intermediate_size", file);
    m.layers = required<std::uint64_t>(j, "num_hidden_layers", file);
    m.heads = required<std::uint64_t>(j, "num_attention_heads", file);
    m.kv_heads = j.contains("num_key_value_heads") ? required<std::uint64_t>(j, "num_key_value_heads", file) : m.heads;
    m.vocab = required<std::uint64_t>(j, "vocab_size", file);
    m.rms_norm_eps = j.contains("rms_norm_eps") ? required<double>(j, "rms_norm_eps", file) : 1e-6;
    m.rope_theta = j.contains("rope_theta") ? required<double>(j, "rope_theta", file) : 10000.0;
    m.max_context = j.contains("max_position_embeddings") ? required<std::uint64_t>(j, "max_position_embeddings", file)
                                                          : 2048;
    if (m.heads == 0 || m.kv_heads == 0 || m.hidden % m.heads != 0 || m.heads % m.kv_heads != 0)
        throw std::runtime_error(fmt::format("{}: heads must divide hidden_size and kv heads must divide heads",
                                             file.string()));
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
    std::vector<std::string> problems;
    if (!missing.empty()) problems.push_back(fmt::format("missing tensors: {}", fmt::join(missing, ", ")));
    if (!unused.empty()) problems.push_back(fmt::format("unexpected tensors: {}", fmt::join(unused, ", ")));
    if (!misshaped.empty()) problems.push_back(fmt::format("mis-shaped tensors: {}", fmt::join(misshaped, "; ")));
    if (!problems.empty()) throw std::runtime_error(fmt::format("{}: {}", file.string(), fmt::join(problems, "; ")));
    return host;
}

void save_hf_model(const std::filesystem::path& dir, const ModelSpec& m, const ParamLayout& layout,
                   const HostParams& params) {
    std::filesystem::create_directories(dir);
    const nlohmann::json config{{"architectures", {"LlamaForCausalLM"}},
                                {"model_type", "llama"},
                                {"hidden_size", m.hidden},
                                {"intermediate_size", m.ffn},
                                {"num_hidden_layers", m.layers},
                                {"num_attention_heads", m.heads},
                                {"num_key_value_heads", m.kv_heads},
                                {"vocab_size", m.vocab},
                                {"rms_norm_eps", m.rms_norm_eps},
                                {"rope_theta", m.rope_theta},
                                {"max_position_embeddings", m.max_context},
                                {"tie_word_embeddings", false}};
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

}  // namespace tune::harness
