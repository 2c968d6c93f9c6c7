#include "sweep/spec.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <toml++/toml.h>
#include <nlohmann/json.hpp>

#include "core/dimensions.h"
#include "core/hf_config.h"
#include "core/input_file.h"
#include "core/nearest.h"
#include "core/number_bounds.h"
#include "core/presets.h"
#include "core/units.h"
#include "core/validity.h"
#include "sweep/toml_bounds.h"

namespace tune {
namespace {

using Names = std::span<const std::string_view>;

constexpr std::array<std::string_view, 10> kSections{"name",  "model",  "hardware",  "space",  "constraints",
                                                     "trial", "search", "framework", "output", "resources"};
constexpr std::array<std::string_view, 12> kModelKeys{"preset", "hf_config",   "name",         "vocab",
                                                      "hidden", "layers",      "heads",        "kv_heads",
                                                      "ffn",    "max_context", "rms_norm_eps", "rope_theta"};
constexpr std::array<std::string_view, 7> kHardwareKeys{"gpus",   "nodes",       "device",     "memory_limit",
                                                        "margin", "host_memory", "host_margin"};
// [space] takes exactly the dimension table's names.
std::array<std::string_view, kDimensionCount> space_keys() {
    std::array<std::string_view, kDimensionCount> keys{};
    for (std::size_t i = 0; i < kDimensionCount; ++i) keys[i] = dimensions()[i].name;
    return keys;
}
constexpr std::array<std::string_view, 2> kConstraintKeys{"global_batch_tokens", "max_world_size"};
constexpr std::array<std::string_view, 16> kTrialKeys{
    "steps",         "warmup",         "timeout", "launcher", "seed", "lr",         "weight_decay", "clip",
    "neftune_alpha", "adam8bit_block", "beta1",   "beta2",    "eps",  "lora_alpha", "max_cv",       "max_steps"};
constexpr std::array<std::string_view, 2> kSearchKeys{"strategy", "budget"};
constexpr std::array<std::string_view, 4> kFrameworkKeys{"name", "bitsandbytes", "lora_dropout", "base_dtype"};
constexpr std::array<std::string_view, 2> kOutputKeys{"database", "report"};
constexpr std::array<std::string_view, 4> kResourceKeys{"gpus_per_node", "nodes", "cpus", "max_concurrent"};
constexpr std::array<std::string_view, 4> kLaunchers{"auto", "local", "mpirun", "srun"};

std::string join(Names names) {
    std::string out;
    for (auto n : names) out += (out.empty() ? "" : ", ") + std::string(n);
    return out;
}

std::string_view type_name(const toml::node& node) {
    switch (node.type()) {
        case toml::node_type::string:
            return "a string";
        case toml::node_type::integer:
            return "an integer";
        case toml::node_type::floating_point:
            return "a float";
        case toml::node_type::boolean:
            return "a boolean";
        case toml::node_type::table:
            return "a table";
        case toml::node_type::array:
            return "a list";
        default:
            return "a date or time";
    }
}

// Reads values out of the parsed TOML, turning every problem into a located ConfigError.
class Reader {
public:
    explicit Reader(std::string file) : file_(std::move(file)) {}

    [[noreturn]] void fail(const toml::source_region& where, const std::string& message) const {
        throw ConfigError(file_, static_cast<std::uint32_t>(where.begin.line),
                          static_cast<std::uint32_t>(where.begin.column), message);
    }
    [[noreturn]] void fail(const std::string& message) const { throw ConfigError(file_, 0, 0, message); }

    void check_keys(const toml::table& table, std::string_view section, Names allowed) const {
        for (auto&& [key, node] : table) {
            const std::string_view k = key.str();
            bool known = false;
            for (auto a : allowed) known = known || a == k;
            if (known) continue;
            const std::string where =
                section.empty() ? std::string("at the top level") : fmt::format("in [{}]", section);
            if (auto guess = nearest(k, allowed))
                fail(key.source(), fmt::format("unknown key '{}' {}; did you mean '{}'?", k, where, *guess));
            fail(key.source(), fmt::format("unknown key '{}' {}; valid keys: {}", k, where, join(allowed)));
        }
    }

    const toml::table* section(const toml::table& root, std::string_view name) const {
        const toml::node* node = root.get(name);
        if (!node) return nullptr;
        if (!node->is_table())
            fail(node->source(), fmt::format("'{}' must be a section ([{}] followed by its keys), got {}", name, name,
                                             type_name(*node)));
        return node->as_table();
    }

    std::optional<std::int64_t> integer(const toml::table& t, std::string_view section, std::string_view key,
                                        std::int64_t min, std::int64_t max) const {
        const toml::node* node = t.get(key);
        if (!node) return std::nullopt;
        return integer_value(*node, section, key, min, max);
    }

    std::int64_t integer_value(const toml::node& node, std::string_view section, std::string_view key, std::int64_t min,
                               std::int64_t max) const {
        if (!node.is_integer())
            fail(node.source(), fmt::format("[{}] {}: expected an integer, got {}", section, key, type_name(node)));
        const std::int64_t v = node.as_integer()->get();
        if (v < min || v > max)
            fail(node.source(), fmt::format("[{}] {}: {} is out of range ({} to {})", section, key, v, min, max));
        return v;
    }

    std::optional<double> number(const toml::table& t, std::string_view section, std::string_view key, double min,
                                 double max) const {
        const toml::node* node = t.get(key);
        if (!node) return std::nullopt;
        double v = 0;
        if (node->is_integer())
            v = static_cast<double>(node->as_integer()->get());
        else if (node->is_floating_point())
            v = node->as_floating_point()->get();
        else
            fail(node->source(), fmt::format("[{}] {}: expected a number, got {}", section, key, type_name(*node)));
        if (!(v >= min && v <= max))
            fail(node->source(), fmt::format("[{}] {}: {} is out of range ({} to {})", section, key, v, min, max));
        return v;
    }

    // A number whose range it shares with its flag (core/number_bounds.h).
    std::optional<double> number(const toml::table& t, const NumberBounds& b) const {
        return number(t, b.section, b.key, b.min, b.max);
    }

    std::optional<std::string> string(const toml::table& t, std::string_view section, std::string_view key) const {
        const toml::node* node = t.get(key);
        if (!node) return std::nullopt;
        if (!node->is_string())
            fail(node->source(), fmt::format("[{}] {}: expected a string, got {}", section, key, type_name(*node)));
        return std::string(node->as_string()->get());
    }

    std::string choice(const toml::table& t, std::string_view section, std::string_view key, Names valid,
                       std::string fallback) const {
        auto value = string(t, section, key);
        if (!value) return fallback;
        for (auto v : valid)
            if (v == *value) return *value;
        fail(t.get(key)->source(), unknown_value(section, key, *value, valid));
    }

    // "80GiB", "80 GB" or "auto" (nullopt). A bare number is refused: it has no unit.
    std::optional<std::uint64_t> size(const toml::table& t, std::string_view section, std::string_view key) const {
        const toml::node* node = t.get(key);
        if (!node) return std::nullopt;
        if (node->is_integer() || node->is_floating_point()) {
            const std::string number = node->is_integer() ? std::to_string(node->as_integer()->get())
                                                          : fmt::format("{}", node->as_floating_point()->get());
            fail(node->source(), fmt::format("[{}] {}: {}: add a unit, e.g. \"{}GiB\"", section, key, number, number));
        }
        if (node->is_string()) {
            const std::string text(node->as_string()->get());
            if (text == "auto") return std::nullopt;
            if (auto bytes = parse_bytes(text); bytes && *bytes > 0) return bytes;
            fail(node->source(), fmt::format("[{}] {}: {} (or \"auto\")", section, key, size_problem(text)));
        }
        fail(node->source(),
             fmt::format("[{}] {}: expected a size such as \"80GiB\", got {}", section, key, type_name(*node)));
    }

    // "10m", "8h", "90s", or an integer number of seconds.
    std::optional<double> duration(const toml::table& t, std::string_view section, std::string_view key) const {
        const toml::node* node = t.get(key);
        if (!node) return std::nullopt;
        std::optional<double> seconds;
        if (node->is_integer())
            seconds = static_cast<double>(node->as_integer()->get());
        else if (node->is_string())
            seconds = parse_duration(node->as_string()->get());
        else
            fail(node->source(),
                 fmt::format("[{}] {}: expected a duration such as \"10m\", got {}", section, key, type_name(*node)));
        if (!seconds || *seconds <= 0)
            fail(node->source(),
                 fmt::format("[{}] {}: '{}' is not a positive duration; write e.g. \"90s\", \"10m\" or \"8h\"", section,
                             key,
                             node->is_string() ? std::string(node->as_string()->get())
                                               : std::to_string(node->as_integer()->get())));
        return seconds;
    }

    // A list (or a single value, taken as a list of one). Empty lists and repeats are errors.
    template <typename T, typename ParseOne>
    std::vector<T> list(const toml::table& t, std::string_view section, std::string_view key,
                        ParseOne parse_one) const {
        const toml::node* node = t.get(key);
        if (!node) return {};
        std::vector<T> values;
        std::vector<const toml::node*> items;
        if (const toml::array* array = node->as_array()) {
            if (array->empty())
                fail(node->source(), fmt::format("[{}] {}: the list is empty; give at least one value", section, key));
            for (const toml::node& item : *array) items.push_back(&item);
        } else {
            items.push_back(node);
        }
        std::set<T> seen;  // a set, not a scan: a list of many values stays O(n log n)
        for (const toml::node* item : items) {
            T value = parse_one(*item);
            if (!seen.insert(value).second)
                fail(item->source(), fmt::format("[{}] {}: {} is listed twice", section, key, describe(*item)));
            values.push_back(value);
        }
        return values;
    }

    // One [space] dimension: its names (enumerations) or integers within its bounds.
    std::vector<DimValue> dimension_list(const toml::table& t, const Dimension& d) const {
        return list<DimValue>(t, "space", d.name, [&](const toml::node& item) {
            if (!d.is_enum()) {
                if (!item.is_integer())
                    fail(item.source(), fmt::format("[space] {}: expected integers, got {}", d.name, type_name(item)));
                return static_cast<DimValue>(integer_value(item, "space", d.name, d.min, d.max));
            }
            if (!item.is_string())
                fail(item.source(), fmt::format("[space] {}: expected strings, got {}", d.name, type_name(item)));
            const std::string text(item.as_string()->get());
            if (auto parsed = d.parse(text)) return *parsed;
            fail(item.source(), unknown_value("space", d.name, text, d.choices));
        });
    }

private:
    static std::string unknown_value(std::string_view section, std::string_view key, const std::string& value,
                                     Names valid) {
        std::string message = fmt::format("[{}] {}: unknown value '{}'; valid: {}", section, key, value, join(valid));
        if (auto guess = nearest(value, valid)) message += fmt::format("; did you mean '{}'?", *guess);
        return message;
    }
    static std::string describe(const toml::node& item) {
        if (item.is_string()) return fmt::format("'{}'", item.as_string()->get());
        if (item.is_integer()) return std::to_string(item.as_integer()->get());
        return "a value";
    }

    std::string file_;
};

// Hidden size splits into heads, heads into KV groups, and RoPE rotates pairs.
// The model rules every configuration is held to (core/validity.h), located at [model].
void check_model_shape(const Reader& r, const ModelSpec& m, const toml::source_region& where) {
    if (auto bad = model_problem(m)) r.fail(where, "[model] " + bad->reason);
}

ModelSpec read_model(const Reader& r, const toml::table& root, const std::filesystem::path& sweep_path) {
    const toml::table* t = r.section(root, "model");
    if (!t)
        r.fail(
            "missing section [model]: name a preset (preset = \"llama-7b\"), give dimensions, "
            "or point hf_config at a Hugging Face config.json");
    r.check_keys(*t, "model", kModelKeys);
    auto preset = r.string(*t, "model", "preset");
    auto hf_config = r.string(*t, "model", "hf_config");
    if (preset && hf_config) r.fail(t->source(), "[model] give either preset or hf_config, not both");

    ModelSpec m;
    if (preset) {
        auto found = find_model(*preset);
        if (!found)
            r.fail(t->get("preset")->source(),
                   fmt::format("[model] preset: unknown model '{}'; known models: {}", *preset, model_names()));
        m = *found;
    } else if (hf_config) {
        std::filesystem::path p(*hf_config);
        if (p.is_relative()) p = sweep_path.parent_path() / p;
        try {
            m = load_hf_config(p);
        } catch (const ConfigError& e) {
            r.fail(t->get("hf_config")->source(), fmt::format("[model] hf_config: {}", e.located()));
        }
    } else {
        m.name = "custom";
        m.max_context = 4096;
    }

    constexpr std::int64_t big = std::int64_t{1} << 40;
    bool overridden = false;
    auto dim = [&](std::string_view key, std::uint64_t& field) {
        if (auto v = r.integer(*t, "model", key, 1, big)) {
            overridden = overridden || static_cast<std::uint64_t>(*v) != field;
            field = static_cast<std::uint64_t>(*v);
        }
    };
    dim("vocab", m.vocab);
    dim("hidden", m.hidden);
    dim("layers", m.layers);
    dim("heads", m.heads);
    if (m.kv_heads == 0) m.kv_heads = m.heads;
    dim("kv_heads", m.kv_heads);
    if (m.kv_heads == 0) m.kv_heads = m.heads;
    dim("ffn", m.ffn);
    dim("max_context", m.max_context);
    if (auto v = r.number(*t, "model", "rms_norm_eps", 0, 1)) m.rms_norm_eps = *v;
    if (auto v = r.number(*t, "model", "rope_theta", 1, 1e12)) m.rope_theta = *v;
    if (auto name = r.string(*t, "model", "name"))
        m.name = *name;
    else if (preset && overridden)
        m.name = *preset + "-modified";
    check_model_shape(r, m, t->source());
    return m;
}

// host_memory per node for offloaded states: a size, or "auto" (this machine's MemTotal, which is the
// node's only where the device is detected here too); left out: unbounded.
void read_host_memory(const Reader& r, const toml::table& t, SweepSpec& s) {
    s.host_margin = r.number(t, bounds::host_margin).value_or(s.host_margin);
    const toml::node* node = t.get("host_memory");
    if (node == nullptr) return;
    s.host_memory_auto = node->is_string() && node->as_string()->get() == "auto";
    if (s.host_memory_auto && s.device != "auto")
        r.fail(node->source(), fmt::format("[hardware] host_memory = \"auto\" reads this machine's memory, which is a "
                                           "node's only where device = \"auto\"; for device \"{}\" give the node's "
                                           "size, e.g. host_memory = \"512GiB\"",
                                           s.device));
    s.host_memory = r.size(t, "hardware", "host_memory");
}

void read_hardware(const Reader& r, const toml::table& root, SweepSpec& s) {
    const toml::table* t = r.section(root, "hardware");
    if (!t) {
        s.hardware = *find_device("cpu");
        return;
    }
    r.check_keys(*t, "hardware", kHardwareKeys);
    s.gpus = static_cast<std::uint32_t>(r.integer(*t, "hardware", "gpus", 1, 1024).value_or(1));
    s.nodes = static_cast<std::uint32_t>(r.integer(*t, "hardware", "nodes", 1, 4096).value_or(1));
    s.device = r.string(*t, "hardware", "device").value_or("auto");
    if (s.device == "auto") {
        s.hardware = *find_device("cpu");  // until the driver sees what is there
    } else if (auto preset = find_device(s.device)) {
        s.hardware = *preset;
    } else {
        r.fail(
            t->get("device")->source(),
            fmt::format("[hardware] device: unknown device '{}'; known devices: auto, {}", s.device, device_names()));
    }
    s.hardware.nodes = s.nodes;
    s.memory_limit_setting = r.size(*t, "hardware", "memory_limit");
    s.margin = r.number(*t, bounds::margin).value_or(s.margin);
    read_host_memory(r, *t, s);
}

void read_space(const Reader& r, const toml::table& root, SweepSpec& s) {
    const toml::table* t = r.section(root, "space");
    if (!t)
        r.fail(
            "missing section [space]: list the values to try, e.g. optimizer = [\"adamw\", \"lion\"] "
            "(see sweeps/demo.toml)");
    r.check_keys(*t, "space", space_keys());
    // An omitted dimension is held at the value a plain training script would use.
    for (std::size_t i = 0; i < kDimensionCount; ++i) {
        const Dimension& d = dimensions()[i];
        s.space.values[i] = r.dimension_list(*t, d);
        if (s.space.values[i].empty()) s.space.values[i] = {d.fallback(s.model)};
    }
    // The space is enumerated in memory (about 300 bytes a combination), so its size is bounded before that.
    if (s.space.size() > kMaxCombinations)
        r.fail(t->source(), fmt::format("[space] has {} combinations; tune enumerates at most {}: shorten the lists "
                                        "or split the sweep",
                                        s.space.size() == UINT64_MAX ? std::string("more than 2^64")
                                                                     : std::to_string(s.space.size()),
                                        kMaxCombinations));
}

// max_cv and max_steps: more steps for a noisy trial, up to a cap (by default
// kDefaultMaxStepsFactor x steps, at least the steps).
void read_noise_rule(const Reader& r, const toml::table& t, TrialSettings& ts) {
    ts.noise.max_cv = r.number(t, bounds::max_cv).value_or(ts.noise.max_cv);
    ts.noise.max_steps = kDefaultMaxStepsFactor * ts.steps;
    if (auto cap = r.integer(t, "trial", "max_steps", 1, 1000000)) {
        if (*cap < ts.steps)
            r.fail(t.get("max_steps")->source(),
                   fmt::format("[trial] max_steps ({}) must be at least steps ({}): it caps the steps a noisy trial "
                               "runs in all; leave it out for {} x steps",
                               *cap, ts.steps, kDefaultMaxStepsFactor));
        ts.noise.max_steps = static_cast<std::uint32_t>(*cap);
    }
}

void read_trial(const Reader& r, const toml::table& root, SweepSpec& s) {
    if (const toml::table* c = r.section(root, "constraints")) {
        r.check_keys(*c, "constraints", kConstraintKeys);
        if (auto v = r.integer(*c, "constraints", "global_batch_tokens", 1, std::int64_t{1} << 50))
            s.global_batch_tokens = static_cast<std::uint64_t>(*v);
        if (auto v = r.integer(*c, "constraints", "max_world_size", 1, 1 << 20))
            s.max_world_size = static_cast<std::uint32_t>(*v);
    }
    const toml::table* t = r.section(root, "trial");
    if (!t) return;
    r.check_keys(*t, "trial", kTrialKeys);
    TrialSettings& ts = s.trial;
    ts.steps = static_cast<std::uint32_t>(r.integer(*t, "trial", "steps", 1, 1000000).value_or(ts.steps));
    ts.warmup = static_cast<std::uint32_t>(r.integer(*t, "trial", "warmup", 0, 1000000).value_or(ts.warmup));
    if (ts.warmup >= ts.steps)
        r.fail(t->get("warmup") ? t->get("warmup")->source() : t->source(),
               fmt::format("[trial] warmup ({}) must be less than steps ({}): throughput is measured after warmup",
                           ts.warmup, ts.steps));
    read_noise_rule(r, *t, ts);
    ts.timeout_s = r.duration(*t, "trial", "timeout").value_or(ts.timeout_s);
    ts.launcher = r.choice(*t, "trial", "launcher", kLaunchers, ts.launcher);
    ts.seed = static_cast<std::uint64_t>(r.integer(*t, "trial", "seed", 0, std::numeric_limits<std::int64_t>::max())
                                             .value_or(static_cast<std::int64_t>(ts.seed)));
    ts.lr = r.number(*t, bounds::lr).value_or(ts.lr);
    ts.weight_decay = r.number(*t, bounds::weight_decay).value_or(ts.weight_decay);
    ts.clip = r.number(*t, bounds::clip).value_or(ts.clip);
    ts.neftune_alpha = r.number(*t, bounds::neftune_alpha).value_or(ts.neftune_alpha);
    if (auto block = r.integer(*t, "trial", "adam8bit_block", 64, 4096)) {
        if ((*block & (*block - 1)) != 0)
            r.fail(t->get("adam8bit_block")->source(),
                   fmt::format("[trial] adam8bit_block: {} is not a power of two (64 to 4096)", *block));
        ts.adam8bit_block = static_cast<std::uint32_t>(*block);
    }
    ts.beta1 = r.number(*t, bounds::beta1);
    ts.beta2 = r.number(*t, bounds::beta2);
    ts.eps = r.number(*t, bounds::eps);
    ts.lora_alpha = r.number(*t, bounds::lora_alpha);
}

std::string beside(const std::filesystem::path& sweep_file, const std::string& path) {
    const std::filesystem::path p(path);
    return p.is_relative() ? (sweep_file.parent_path() / p).string() : path;
}

void read_search_and_output(const Reader& r, const toml::table& root, SweepSpec& s) {
    if (const toml::table* t = r.section(root, "search")) {
        r.check_keys(*t, "search", kSearchKeys);
        // choice() accepts only the names, so parsing its answer cannot fail.
        s.strategy = *parse_strategy(
            r.choice(*t, "search", "strategy", kSearchStrategyNames, std::string(to_string(s.strategy))));
        s.budget_s = r.duration(*t, "search", "budget");
    }
    if (const toml::table* t = r.section(root, "framework")) {
        r.check_keys(*t, "framework", kFrameworkKeys);
        s.framework = *parse_framework_profile(
            r.choice(*t, "framework", "name", kFrameworkProfileNames, std::string(to_string(s.framework))));
        if (const auto text = r.string(*t, "framework", "bitsandbytes")) {
            s.libraries.bitsandbytes = parse_version(*text);
            if (!s.libraries.bitsandbytes)
                r.fail(t->get("bitsandbytes")->source(),
                       fmt::format("[framework] bitsandbytes: \"{}\" is not a version; write it as pip shows it, "
                                   "e.g. bitsandbytes = \"0.43.1\"",
                                   *text));
        }
        s.lora_dropout = r.number(*t, bounds::lora_dropout).value_or(s.lora_dropout);
        s.base_dtype = *parse_base_dtype(
            r.choice(*t, "framework", "base_dtype", kBaseDtypeNames, std::string(to_string(s.base_dtype))));
    }
    if (const toml::table* t = r.section(root, "output")) {
        r.check_keys(*t, "output", kOutputKeys);
        const auto database = r.string(*t, "output", "database");
        s.database_from_file = database.has_value();
        s.database = database.value_or(s.database);
        s.report = r.string(*t, "output", "report").value_or(s.report);
        if (s.database.empty()) r.fail(t->source(), "[output] database: the path is empty");
        // Paths written in a sweep file are relative to the file, wherever tune runs from.
        if (database) s.database = beside(s.path, s.database);
        if (!s.report.empty()) s.report = beside(s.path, s.report);
    }
    if (s.report.empty()) s.report = s.name + ".html";
}

// A count in [resources]: a positive integer, or "auto" (nullopt: read from the allocation).
std::optional<std::uint32_t> count_or_auto(const Reader& r, const toml::table& t, std::string_view key,
                                           std::int64_t max) {
    const toml::node* node = t.get(key);
    if (!node) return std::nullopt;
    if (node->is_string() && node->as_string()->get() == "auto") return std::nullopt;
    if (node->is_string())
        r.fail(node->source(), fmt::format("[resources] {}: '{}' is not a count; write a number such as 8, or \"auto\"",
                                           key, node->as_string()->get()));
    return static_cast<std::uint32_t>(r.integer_value(*node, "resources", key, 1, max));
}

void read_resources(const Reader& r, const toml::table& root, SweepSpec& s) {
    const toml::table* t = r.section(root, "resources");
    if (!t) return;
    r.check_keys(*t, "resources", kResourceKeys);
    s.resources.declared = true;
    s.resources.gpus_per_node = count_or_auto(r, *t, "gpus_per_node", 1024);
    s.resources.nodes = count_or_auto(r, *t, "nodes", 4096);
    s.resources.cpus = count_or_auto(r, *t, "cpus", 65536);
    s.resources.max_concurrent = count_or_auto(r, *t, "max_concurrent", 4096);
}

}  // namespace

std::vector<SweepFileSection> sweep_file_keys() {
    const auto keys = [](Names names) { return std::vector<std::string_view>(names.begin(), names.end()); };
    std::vector<SweepFileSection> out{{"", keys(kSections)}};
    out.push_back({"model", keys(kModelKeys)});
    out.push_back({"hardware", keys(kHardwareKeys)});
    out.push_back({"space", keys(space_keys())});
    out.push_back({"constraints", keys(kConstraintKeys)});
    out.push_back({"trial", keys(kTrialKeys)});
    out.push_back({"search", keys(kSearchKeys)});
    out.push_back({"framework", keys(kFrameworkKeys)});
    out.push_back({"output", keys(kOutputKeys)});
    out.push_back({"resources", keys(kResourceKeys)});
    return out;
}

SweepSpec parse_sweep(std::string_view text, const std::filesystem::path& path) {
    const std::string file = path.string();
    Reader r(file);
    bool blank = true;
    for (char c : text) blank = blank && (c == ' ' || c == '\n' || c == '\r' || c == '\t');
    if (blank) r.fail("the file is empty; a sweep needs at least [model] and [space] (see sweeps/demo.toml)");

    check_toml_bounds(text, file);  // before the parser, which recurses on what it reads
    toml::table root;
    try {
        root = toml::parse(text, file);
    } catch (const toml::parse_error& e) {
        r.fail(e.source(), fmt::format("TOML syntax error: {}", e.description()));
    }
    r.check_keys(root, "", kSections);

    SweepSpec s;
    s.path = path;
    s.text = std::string(text);
    s.text_hash = stable_hash(text);
    if (auto name = r.string(root, "top level", "name")) {
        if (name->empty()) r.fail(root.get("name")->source(), "name: the sweep name is empty");
        // It names files beside the sweep (NAME.html, tune-NAME.sbatch): nothing that leaves the folder.
        if (name->find_first_of("/\\") != std::string::npos || name->find("..") != std::string::npos)
            r.fail(root.get("name")->source(),
                   "name: the sweep name names files (NAME.html, tune-NAME.sbatch): no '/', '\\' or '..'");
        s.name = *name;
    } else {
        s.name = path.stem().string();
    }
    s.model = read_model(r, root, path);
    read_hardware(r, root, s);
    read_space(r, root, s);
    read_trial(r, root, s);
    read_search_and_output(r, root, s);
    read_resources(r, root, s);
    return s;
}

SweepSpec load_sweep(const std::filesystem::path& path) {
    return parse_sweep(read_input_file(path, kMaxSweepFileBytes, "sweep file"), path);
}

std::optional<std::string> host_memory_note(const SweepSpec& spec) {
    const std::vector<DimValue>& offloads = spec.space.of("offload");
    const bool offloads_any =
        std::any_of(offloads.begin(), offloads.end(), [](DimValue v) { return kOffloads[v] != Offload::none; });
    if (!offloads_any || spec.host_memory) return std::nullopt;
    return std::string(
        "host memory is taken as unbounded: [hardware] host_memory is not given (e.g. host_memory = "
        "\"512GiB\" per node, or \"auto\" with device = \"auto\"), so only the device limits offload");
}

void resolve_auto_device(SweepSpec& spec, const std::optional<Hardware>& detected,
                         std::optional<std::uint64_t> machine_memory) {
    if (spec.device != "auto") return;
    spec.hardware = detected.value_or(*find_device("cpu"));
    spec.hardware.nodes = spec.nodes;
    if (spec.host_memory_auto) spec.host_memory = machine_memory;
}

}  // namespace tune
