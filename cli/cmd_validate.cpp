// `tune validate FILE`: parse a sweep file, expand its space, and say what it
// would run. Exit 0 when something is runnable, 1 when every combination is
// invalid, 2 when the file itself is wrong.
#include <memory>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "core/collapsed_values.h"
#include "core/units.h"
#include "launch/launch.h"
#include "reports/text_table.h"
#include "sweep/space.h"
#include "sweep/spec.h"

namespace tune::cli {
namespace {

struct ValidateOptions {
    std::string file;
    bool json = false;
};

std::string dimension_product(const SpaceSpec& s) {
    std::string out;
    for (std::size_t i = 0; i < kDimensionCount; ++i)
        out += fmt::format("{}{} {}", i == 0 ? "" : " x ", s.values[i].size(), dimensions()[i].name);
    return out;
}

void print_text(const SweepSpec& spec, const SpaceCounts& counts) {
    std::string out;
    const ModelSpec& m = spec.model;
    out += fmt::format("{}: sweep \"{}\" is valid\n", spec.path.string(), spec.name);
    out += fmt::format(
        "  model     {}: {:.3f}B parameters ({} layers, hidden {}, {} heads / {} KV, ffn {}, vocab {})\n", m.name,
        static_cast<double>(m.param_count()) / 1e9, m.layers, m.hidden, m.heads, m.kv_heads, m.ffn, m.vocab);
    const std::string limit_source = spec.memory_limit_setting ? "set" : "the device's";
    out += fmt::format(
        "  hardware  {} rank(s) per trial ({} GPU(s) x {} node(s)), device {}{}; memory limit {} ({}), "
        "margin {:.0f}% -> {} usable\n",
        spec.world_size(), spec.gpus, spec.nodes, spec.device,
        spec.device == "auto" ? " (resolved when the sweep runs)" : "", format_bytes(spec.memory_limit()), limit_source,
        spec.margin * 100, format_bytes(spec.usable_memory()));
    if (spec.host_memory)
        out += fmt::format("  host      {} per node for offloaded states, margin {:.0f}%\n",
                           format_bytes(*spec.host_memory), spec.host_margin * 100);
    else if (auto note = host_memory_note(spec))
        out += fmt::format("  host      {}\n", *note);
    out += fmt::format("  space     {} = {} combinations\n", dimension_product(spec.space), counts.total);
    const auto collapsed = counts.invalid.find(kCollapsedKind);
    const std::uint64_t n_collapsed = collapsed == counts.invalid.end() ? 0 : collapsed->second.count;
    out += fmt::format("  invalid   {}\n", counts.total - counts.valid - n_collapsed);
    for (const auto& [kind, group] : counts.invalid)
        if (kind != kCollapsedKind)
            out += fmt::format("              {:>6}  {}  (e.g. {})\n", group.count, kind, group.example);
    // Values the engine runs identically to another value in the space: those configurations run once.
    if (n_collapsed > 0)
        out += fmt::format("  collapsed {}  (run once, as the value they equal; e.g. {})\n", n_collapsed,
                           collapsed->second.example);
    out += fmt::format("  runnable  {}\n", counts.valid);
    out += fmt::format("  trial     {} steps ({} warmup), timeout {}, launcher {}\n", spec.trial.steps,
                       spec.trial.warmup, format_duration(spec.trial.timeout_s), spec.trial.launcher);
    // Validation may happen on another machine than the sweep, so this informs, it does not fail.
    const Launcher launcher = choose_launcher(spec.trial.launcher, spec.world_size());
    if (auto problem = placement_problem(launcher, spec.world_size(), spec.nodes))
        out += fmt::format("  launch    cannot start here: {}\n", *problem);
    out += fmt::format("  search    {}, budget {}\n", to_string(spec.strategy),
                       spec.budget_s ? format_duration(*spec.budget_s) : std::string("none"));
    if (spec.framework != FrameworkProfile::tune)
        out += fmt::format(
            "  framework {}: pruning, best and the reports answer with its predicted device memory; "
            "trials run our engine\n",
            to_string(spec.framework));
    out += fmt::format("  output    database {}, report {}\n", spec.database, spec.report);
    if (counts.valid == 0) out += fmt::format("nothing to run: every combination is invalid\n");
    // Names and paths come from the file: escape control characters before the terminal sees them.
    fmt::print("{}", printable(out, "\n"));
}

void print_json(const SweepSpec& spec, const SpaceCounts& counts) {
    nlohmann::json invalid = nlohmann::json::object();
    nlohmann::json collapsed = nullptr;
    for (const auto& [kind, group] : counts.invalid) {
        const nlohmann::json j{{"count", group.count}, {"example", group.example}};
        if (kind == kCollapsedKind)
            collapsed = j;
        else
            invalid[kind] = j;
    }
    nlohmann::json out{{"file", spec.path.string()},
                       {"name", spec.name},
                       {"model", spec.model},
                       {"parameters", spec.model.param_count()},
                       {"device", spec.device},
                       {"world_size", spec.world_size()},
                       {"framework", to_string(spec.framework)},
                       {"memory_limit", spec.memory_limit()},
                       {"usable_memory", spec.usable_memory()},
                       {"combinations", counts.total},
                       {"runnable", counts.valid},
                       {"invalid", invalid},
                       {"collapsed", collapsed}};
    fmt::print("{}\n", out.dump(2));
}

}  // namespace

void add_validate_command(CLI::App& app, int& exit_code) {
    auto opts = std::make_shared<ValidateOptions>();
    auto* cmd = app.add_subcommand("validate",
                                   "Parse a sweep file, expand its space, and report its size and any problems.\n"
                                   "Exit codes: 0 valid, 1 valid but nothing runnable, 2 the file has errors.");
    cmd->add_option("file", opts->file, "Sweep file (TOML), e.g. sweeps/demo.toml")->required();
    cmd->add_flag("--json", opts->json, "Print one JSON object instead of text");
    cmd->callback([opts, &exit_code] {
        const SweepSpec spec = load_sweep(opts->file);
        const SpaceCounts counts = count(expand_space(spec));
        if (opts->json)
            print_json(spec, counts);
        else
            print_text(spec, counts);
        exit_code = counts.valid > 0 ? kExitOk : kExitNo;
    });
}

}  // namespace tune::cli
