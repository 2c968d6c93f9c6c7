// `tune presets`: the models and devices tune knows, with their numbers.
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "core/presets.h"
#include "core/units.h"
#include "reports/text_table.h"

namespace tune::cli {
namespace {

std::string short_count(std::uint64_t n) {
    const double v = static_cast<double>(n);
    if (v >= 1e9) return fmt::format("{:.2f}B", v / 1e9);
    if (v >= 1e6) return fmt::format("{:.2f}M", v / 1e6);
    return fmt::format("{:.1f}K", v / 1e3);
}

void print_presets(bool as_json) {
    if (as_json) {
        nlohmann::json out{{"models", nlohmann::json::array()}, {"devices", nlohmann::json::array()}};
        for (const auto& p : model_presets()) {
            nlohmann::json m = p.spec;
            m["parameters"] = p.spec.param_count();
            m["source"] = p.source;
            out["models"].push_back(m);
        }
        for (const auto& p : device_presets()) {
            nlohmann::json d = p.hardware;
            d["source"] = p.source;
            out["devices"].push_back(d);
        }
        fmt::print("{}\n", out.dump(2));
        return;
    }
    TextTable models({"model", "params", "exact", "vocab", "hidden", "layers", "heads", "kv", "ffn", "max ctx"});
    for (const auto& p : model_presets()) {
        const auto& m = p.spec;
        models.add_row({m.name, short_count(m.param_count()), std::to_string(m.param_count()), std::to_string(m.vocab),
                        std::to_string(m.hidden), std::to_string(m.layers), std::to_string(m.heads),
                        std::to_string(m.kv_heads), std::to_string(m.ffn), std::to_string(m.max_context)});
    }
    TextTable devices({"device", "backend", "memory", "bf16 TFLOP/s", "fp32 TFLOP/s", "HBM TB/s", "link GB/s",
                       "overhead", "training"});
    for (const auto& p : device_presets()) {
        const auto& h = p.hardware;
        devices.add_row({h.device, std::string(to_string(h.backend)), format_bytes(h.memory_bytes),
                         fmt::format("{:.1f}", h.peak_flops_half / 1e12),
                         fmt::format("{:.1f}", h.peak_flops_fp32 / 1e12),
                         fmt::format("{:.2f}", h.hbm_bytes_per_s / 1e12),
                         fmt::format("{:.0f}", h.intra_node_bytes_per_s / 1e9), format_bytes(h.runtime_overhead_bytes),
                         h.training_efficiency > 0 ? fmt::format("{:.1f}%", 100 * h.training_efficiency) : "-"});
    }
    fmt::print("Models\n{}\nDevices\n{}\nSources:\n", models.render("  "), devices.render("  "));
    for (const auto& p : model_presets()) fmt::print("  {:<14} {}\n", p.spec.name, p.source);
    for (const auto& p : device_presets()) fmt::print("  {:<14} {}\n", p.hardware.device, p.source);
}

}  // namespace

void add_presets_command(CLI::App& app, int& exit_code) {
    auto* cmd = app.add_subcommand("presets", "List the model and device presets with their numbers and sources.");
    auto as_json = std::make_shared<bool>(false);
    cmd->add_flag("--json", *as_json, "Print one JSON object with every preset");
    cmd->callback([&exit_code, as_json] {
        print_presets(*as_json);
        exit_code = kExitOk;
    });
}

}  // namespace tune::cli
