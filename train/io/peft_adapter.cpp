#include "train/io/peft_adapter.h"

#include <algorithm>
#include <fstream>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "core/config_error.h"
#include "core/input_file.h"
#include "core/output_file.h"
#include "core/peft_modules.h"
#include "train/io/safetensors.h"

namespace tune::train {

namespace {

constexpr std::uint64_t kMaxConfigBytes = 1 << 20;

std::set<std::string> module_set(LoraTargets t) {
    const std::vector<std::string> modules = peft_target_modules(t);
    return {modules.begin(), modules.end()};
}

LoraTargets targets_of(const nlohmann::json& modules, const std::string& file) {
    if (modules.is_string() && modules.get<std::string>() == "all-linear") return LoraTargets::all_linear;
    if (!modules.is_array())
        throw ConfigError(file, 0, 0, "target_modules: expected a list of module names or \"all-linear\"");
    const std::set<std::string> all = module_set(LoraTargets::all_linear);
    std::set<std::string> names;
    for (const auto& m : modules) {
        const std::string name = m.is_string() ? m.get<std::string>() : m.dump();
        if (!all.contains(name))
            throw ConfigError(file, 0, 0,
                              fmt::format("target_modules: tune has no adapter for \"{}\" (it adapts {})", name,
                                          fmt::join(peft_target_modules(LoraTargets::all_linear), ", ")));
        names.insert(name);
    }
    for (LoraTargets t : kLoraTargets)
        if (names == module_set(t)) return t;
    throw ConfigError(file, 0, 0,
                      fmt::format("target_modules [{}]: tune trains attention (q, k, v, o), all-linear (also gate, "
                                  "up, down) or qv (q and v) adapters",
                                  fmt::join(names, ", ")));
}

}  // namespace

PeftAdapterConfig load_peft_config(const std::filesystem::path& dir) {
    const std::filesystem::path path = dir / "adapter_config.json";
    const std::string file = path.string();
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(read_input_file(path, kMaxConfigBytes, "adapter_config.json"));
    } catch (const nlohmann::json::exception& e) {
        throw ConfigError(file, 0, 0, fmt::format("not JSON: {}", e.what()));
    }
    if (!j.is_object() || !j.contains("r") || !j["r"].is_number_unsigned() || j["r"].get<std::uint64_t>() == 0 ||
        j["r"].get<std::uint64_t>() > 65536)
        throw ConfigError(file, 0, 0, "r: expected the LoRA rank, a positive integer");
    PeftAdapterConfig c;
    c.rank = static_cast<std::uint32_t>(j["r"].get<std::uint64_t>());
    // Absent: peft.LoraConfig's default, 8. Present, it must be a number: "100" is not read as 8.
    c.alpha = 8.0;
    if (j.contains("lora_alpha") && !j["lora_alpha"].is_null()) {
        const nlohmann::json& alpha = j["lora_alpha"];
        if (!alpha.is_number() || !(alpha.get<double>() > 0) || !(alpha.get<double>() <= 1e6))
            throw ConfigError(
                file, 0, 0, fmt::format("lora_alpha: expected a positive number (at most 1e6), got {}", alpha.dump()));
        c.alpha = alpha.get<double>();
    }
    c.targets = targets_of(j.value("target_modules", nlohmann::json()), file);
    return c;
}

void apply_peft_config(const PeftAdapterConfig& peft, TrialConfig& c) {
    if (!c.adapters()) c.method = Method::lora;
    c.lora_rank = peft.rank;
    c.lora_alpha = peft.alpha;
    c.lora_targets = peft.targets;
}

HostParams load_peft_adapter(const std::filesystem::path& dir, const ParamLayout& layout) {
    const std::filesystem::path file = dir / "adapter_model.safetensors";
    const SafetensorsFile st = SafetensorsFile::load(file);
    std::set<std::string> unused;
    for (const auto& [name, entry] : st.entries()) unused.insert(name);
    std::vector<std::string> problems;
    HostParams host;
    for (std::size_t i = 0; i < layout.buffers(); ++i) {
        const FlatLayout& f = layout.flat(i);
        std::vector<float> buf(static_cast<std::size_t>(f.padded), 0.0f);
        for (std::size_t t = 0; t < f.tensors.size(); ++t) {
            const std::string name = kPeftPrefix + tensor_name(layout, i, t);
            const auto it = st.entries().find(name);
            const std::vector<std::int64_t> want{f.tensors[t].rows, f.tensors[t].cols};
            if (it == st.entries().end()) {
                problems.push_back("missing " + name);
                continue;
            }
            unused.erase(name);
            if (it->second.shape != want) {
                problems.push_back(fmt::format("{} is [{}], expected [{}]", name, fmt::join(it->second.shape, ", "),
                                               fmt::join(want, ", ")));
                continue;
            }
            const std::vector<float> values = st.read_f32(name);
            std::copy(values.begin(), values.end(), buf.begin() + f.tensors[t].offset);
        }
        host.push_back(std::move(buf));
    }
    for (const std::string& name : unused) problems.push_back("unexpected " + name);
    if (!problems.empty()) throw ConfigError(file.string(), 0, 0, fmt::format("{}", fmt::join(problems, "; ")));
    return host;
}

void save_peft_adapter(const std::filesystem::path& dir, const TrialConfig& c, const ParamLayout& layout,
                       const HostParams& adapters) {
    std::filesystem::create_directories(dir);
    const std::vector<std::string> modules = peft_target_modules(c.lora_targets);
    const nlohmann::json config{{"peft_type", "LORA"},       {"task_type", "CAUSAL_LM"},
                                {"r", c.lora_rank},          {"lora_alpha", c.lora_scale() * c.lora_rank},
                                {"lora_dropout", 0.0},       {"bias", "none"},
                                {"target_modules", modules}, {"fan_in_fan_out", false}};
    write_output_file(dir / "adapter_config.json", config.dump(2) + "\n", "the adapter's config");
    std::vector<NamedTensor> tensors;
    for (std::size_t i = 0; i < layout.buffers(); ++i) {
        const FlatLayout& f = layout.flat(i);
        for (std::size_t t = 0; t < f.tensors.size(); ++t) {
            const TensorView& v = f.tensors[t];
            const auto begin = adapters[i].begin() + v.offset;
            tensors.push_back({kPeftPrefix + tensor_name(layout, i, t),
                               {v.rows, v.cols},
                               std::vector<float>(begin, begin + v.numel())});
        }
    }
    write_output_file(dir / "adapter_model.safetensors", safetensors_bytes(tensors), "the adapter's weights");
}

void check_adapter_destination(const std::filesystem::path& dir) {
    std::error_code ec;
    if (std::filesystem::exists(dir, ec) && !std::filesystem::is_directory(dir, ec))
        throw OutputFileError(fmt::format("cannot save the adapter to {}: it is not a directory", dir.string()));
    std::filesystem::create_directories(dir, ec);
    if (ec) throw OutputFileError(fmt::format("cannot save the adapter to {}: {}", dir.string(), ec.message()));
    check_output_path(dir / "adapter_config.json", "the adapter's config");
    check_output_path(dir / "adapter_model.safetensors", "the adapter's weights");
}

}  // namespace tune::train
