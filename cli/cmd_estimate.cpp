// `tune estimate`: the analytic estimator for one configuration given by
// flags, or for every configuration of a sweep file (counts and the
// predicted Pareto front). Exit 0 when something fits, 1 when nothing does.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/dimension_flags.h"
#include "cli/framework_flag.h"
#include "cli/number_flags.h"
#include "core/hf_config.h"
#include "core/presets.h"
#include "core/units.h"
#include "core/validity.h"
#include "driver/plan.h"
#include "estimate/estimate.h"
#include "estimate/frameworks/framework_profile.h"
#include "estimate/memory_limit_check.h"
#include "exports/framework.h"
#include "kernels/device_query.h"
#include "reports/predicted_front.h"
#include "reports/report_format.h"
#include "reports/text_table.h"
#include "sweep/space.h"
#include "sweep/spec.h"
#include "train/memory/host_memory.h"

namespace tune::cli {
namespace {

struct EstimateCliOptions {
    std::string file;
    std::string model = "llama-7b";
    std::string hf_config;  // a Hugging Face config.json (or its folder) instead of a preset
    DimensionFlags dims;
    std::uint32_t gpus = 1;
    std::string device = "h100-80gb";
    std::string memory_limit;
    double margin = 0.05;
    std::string host_memory;  // per node, for what offload keeps there; empty: unbounded
    double host_margin = 0.10;
    std::uint32_t cpu_threads = 0;  // 0: one (single form), the sweep's own share of the cores (file form)
    std::optional<double> lora_alpha;
    bool json = false;
    std::string framework;               // a framework's memory profile on top of tune's engine
    std::string bitsandbytes;            // its bitsandbytes version, where the profile's QLoRA rules depend on it
    std::optional<double> lora_dropout;  // its LoRA dropout
    std::string base_dtype;              // the dtype its script loads an adapter model's base in
};

template <typename T>
T parsed(std::optional<T> value, std::string_view flag, std::string_view text, std::string_view choices) {
    if (!value) throw ConfigError(fmt::format("{} \"{}\" is not one of: {}", flag, text, choices));
    return *value;
}

// What `tune estimate` assumes for a flag not given: a typical fine-tuning run on one GPU.
TrialConfig estimate_defaults() {
    TrialConfig c;
    c.precision = Precision::bf16_mixed;
    c.context = 4096;
    return c;
}

TrialConfig config_from(const EstimateCliOptions& o) {
    TrialConfig c = estimate_defaults();
    if (o.hf_config.empty()) {
        c.model = parsed(find_model(o.model), "--model", o.model, model_names());
    } else {
        std::filesystem::path p(o.hf_config);
        if (std::filesystem::is_directory(p)) p /= "config.json";
        c.model = load_hf_config(p);
    }
    o.dims.apply(c);
    c.world_size = o.gpus;
    c.lora_alpha = o.lora_alpha;
    return c;
}

// --bitsandbytes, --lora-dropout and --base-dtype over the sweep's [framework] settings of the same names.
void apply_library_flags(const EstimateCliOptions& o, EstimateOptions& e) {
    if (o.lora_dropout) e.lora_dropout = *o.lora_dropout;
    if (!o.base_dtype.empty()) e.base_dtype = *parse_base_dtype(o.base_dtype);  // the flag accepts only the names
    if (o.bitsandbytes.empty()) return;
    e.libraries.bitsandbytes = parse_version(o.bitsandbytes);
    if (!e.libraries.bitsandbytes)
        throw ConfigError(fmt::format("--bitsandbytes \"{}\" is not a version; write it as pip shows it, e.g. 0.43.1",
                                      o.bitsandbytes));
}

EstimateOptions options_from(const EstimateCliOptions& o) {
    EstimateOptions e;
    if (!o.memory_limit.empty()) e.memory_limit = require_bytes(o.memory_limit, "--memory-limit");
    e.margin = o.margin;
    if (!o.host_memory.empty()) e.host_memory = require_bytes(o.host_memory, "--host-memory");
    e.host_margin = o.host_margin;
    e.cpu_threads = std::max<std::uint32_t>(o.cpu_threads, 1);
    apply_profile_options(framework_flag_profile(o.framework), e);
    apply_library_flags(o, e);
    return e;
}

std::string percent(double fraction) { return fmt::format("{:.1f}%", 100.0 * fraction); }

nlohmann::json memory_json(const MemoryBreakdown& m) {
    nlohmann::json j;
    for (Component c : kComponents) j[std::string(to_string(c))] = m[c];
    j["peak"] = m.peak;
    j["peak_phase"] = m.peak_phase;
    return j;
}

// The stack's views, with what it runs that our engine does not (bitsandbytes, LoRA dropout) echoed.
nlohmann::json views_json(const FrameworkEstimate& f, FrameworkProfile profile, const EstimateOptions& o) {
    nlohmann::json views{
        {"framework", to_string(profile)}, {"lora_dropout", o.lora_dropout}, {"base_dtype", to_string(o.base_dtype)}};
    if (o.libraries.bitsandbytes) views["bitsandbytes"] = to_string(*o.libraries.bitsandbytes);
    for (std::size_t v = 0; v < kMemoryViewNames.size(); ++v)
        views[std::string(kMemoryViewNames[v])] = f.views.bytes[v];
    nlohmann::json terms = nlohmann::json::array();
    for (const FrameworkTerm& t : f.terms) terms.push_back({{"what", t.what}, {"bytes", t.bytes}});
    views["terms"] = terms;
    nlohmann::json cached = nlohmann::json::array();
    for (const FrameworkTerm& t : f.cached) cached.push_back({{"what", t.what}, {"bytes", t.bytes}});
    views["cached_terms"] = cached;
    if (f.engine.host_memory.peak > 0) {  // offload: the stack's host memory per rank, and what it adds to ours
        nlohmann::json host_terms = nlohmann::json::array();
        for (const FrameworkTerm& t : f.host_terms) host_terms.push_back({{"what", t.what}, {"bytes", t.bytes}});
        views["host"] = f.host;
        views["host_terms"] = host_terms;
    }
    return views;
}

// The stack's step: our engine's under the profile's options, plus its time terms.
nlohmann::json framework_time_json(const FrameworkEstimate& f, FrameworkProfile profile) {
    nlohmann::json terms = nlohmann::json::array();
    for (const FrameworkTimeTerm& t : f.time_terms) terms.push_back({{"what", t.what}, {"seconds", t.seconds}});
    return {{"framework", to_string(profile)},  {"step_s", f.step_s}, {"tokens_per_s", f.tokens_per_s}, {"mfu", f.mfu},
            {"engine_step_s", f.engine.step_s}, {"terms", terms}};
}

// Pipeline parallelism: every stage's first rank, layers, peak and components (its ranks hold the same).
nlohmann::json stages_json(const Estimate& e) {
    nlohmann::json stages = nlohmann::json::array();
    for (const StageMemory& s : e.stages) {
        nlohmann::json components = memory_json(s.memory);
        components.erase("peak"), components.erase("peak_phase");
        stages.push_back({{"stage", s.stage},
                          {"rank", s.rank},
                          {"layers", s.layers},
                          {"peak", s.memory.peak},
                          {"peak_phase", s.memory.peak_phase},
                          {"components", components}});
    }
    return stages;
}

nlohmann::json estimate_json(const TrialConfig& c, const Estimate& e) {
    nlohmann::json j{{"config", c},
                     {"memory", memory_json(e.memory)},
                     {"time", {{"step_s", e.step_s}, {"tokens_per_s", e.tokens_per_s}, {"mfu", e.mfu}}},
                     {"fits", e.fits},
                     {"limit", e.limit},
                     {"host_memory", memory_json(e.host_memory)},
                     {"host_node_bytes", e.host_node_bytes}};
    if (!e.stages.empty()) {
        j["stages"] = stages_json(e);
        j["time"]["pipeline_bubble"] = e.pipeline_bubble;
    }
    return j;
}

// Pipeline parallelism: the worst stage (whose components the table above shows), the spread, each stage.
void print_stages_text(const Estimate& e) {
    if (e.stages.empty()) return;
    const auto [low, high] = std::minmax_element(
        e.stages.begin(), e.stages.end(), [](const auto& a, const auto& b) { return a.memory.peak < b.memory.peak; });
    fmt::print(
        "  stages       {}: the table is stage {}'s (the largest peak); peaks {} to {} ({} spread); "
        "bubble {}\n",
        e.stages.size(), high->stage, format_bytes(low->memory.peak), format_bytes(high->memory.peak),
        percent(static_cast<double>(high->memory.peak - low->memory.peak) /
                static_cast<double>(std::max<std::uint64_t>(high->memory.peak, 1))),
        percent(e.pipeline_bubble));
    for (const StageMemory& s : e.stages)
        fmt::print("    stage {:<3} ranks from {:<5} {:>3} layers  peak {:>10}  at {}\n", s.stage, s.rank, s.layers,
                   format_bytes(s.memory.peak), s.memory.peak_phase);
}

// Offload's ledger: the components on the host, per rank and per node, against the node's host memory.
void print_host_text(const TrialConfig& c, const Estimate& e, const EstimateOptions& o) {
    if (e.host_memory.peak == 0) return;
    fmt::print("  host memory (offload {}):", to_string(c.offload));
    for (Component comp : kComponents)
        if (e.host_memory[comp] > 0) fmt::print(" {} {}", to_string(comp), format_bytes(e.host_memory[comp]));
    const std::uint32_t ranks = ranks_per_node(c, o);
    fmt::print("\n  host         {} per rank, {} per node ({} rank{})", format_bytes(e.host_memory.peak),
               format_bytes(e.host_node_bytes), ranks, ranks == 1 ? "" : "s");
    if (const auto usable = usable_host_bytes(o.host_memory, o.host_margin))
        fmt::print(" {} usable {} (host memory less {:.0f}% margin)\n", e.host_node_bytes <= *usable ? "<=" : ">",
                   format_bytes(*usable), o.host_margin * 100);
    else
        fmt::print(", host memory unbounded (--host-memory sets it)\n");
}

void print_single_text(const TrialConfig& c, const Hardware& hw, const Estimate& e, std::uint64_t usable,
                       const EstimateOptions& o) {
    fmt::print("{} on {}: {}\n", printable(c.model.name), hw.device, summary(c));
    TextTable table({"component", "bytes", "size", "share of peak"});
    const double peak = static_cast<double>(std::max<std::uint64_t>(e.memory.peak, 1));
    for (Component comp : kComponents) {
        const std::uint64_t b = e.memory[comp];
        table.add_row(
            {std::string(to_string(comp)), std::to_string(b), bytes_text(b), percent(static_cast<double>(b) / peak)});
    }
    table.add_row({"peak", std::to_string(e.memory.peak), bytes_text(e.memory.peak), "100.0%"});
    fmt::print("{}", table.render("  "));
    fmt::print("  peak phase   {}\n", e.memory.peak_phase);
    print_stages_text(e);
    fmt::print("  step time    {:.4g} s    tokens/s {} (all ranks)    MFU {}\n", e.step_s,
               throughput_text(e.tokens_per_s), percent(e.mfu));
    print_host_text(c, e, o);
    const bool device_fits = e.limit.find("device") == std::string::npos;
    fmt::print("  fits         {}{} (peak {} {} usable {}: limit less {:.0f}% margin)\n", e.fits ? "yes" : "no",
               e.fits ? "" : fmt::format(": {} memory", e.limit), format_bytes(e.memory.peak), device_fits ? "<=" : ">",
               format_bytes(usable), o.margin * 100);
}

// A combination the engine cannot run is answered "invalid" (exit 1, like
// "does not fit"); a value no configuration may have is bad input (exit 2).
// `profile`: the stack that cannot run it (estimate/frameworks/framework_validity), our engine otherwise.
int report_invalid(const TrialConfig& c, const Hardware& hw, const Invalidity& bad, bool json,
                   FrameworkProfile profile = FrameworkProfile::tune) {
    if (refuses_input(bad)) throw ConfigError(bad.reason);
    if (json) {
        nlohmann::json j{{"config", c}, {"device", hw.device}, {"invalid", bad.reason}, {"fits", false}};
        if (profile != FrameworkProfile::tune) j["framework"] = to_string(profile);
        fmt::print("{}\n", j.dump(2));
    } else {
        fmt::print("{} on {}: {}\n  invalid      {}\n", printable(c.model.name), hw.device, summary(c),
                   printable(bad.reason));
    }
    return kExitNo;
}

int run_single(const EstimateCliOptions& opts) {
    const TrialConfig c = config_from(opts);
    const Hardware hw = parsed(find_device(opts.device), "--device", opts.device, device_names());
    if (auto bad = invalid_reason(c)) return report_invalid(c, hw, *bad, opts.json);
    const EstimateOptions o = options_from(opts);
    if (o.memory_limit)
        if (auto w = limit_above_device(*o.memory_limit, hw)) fmt::print(stderr, "warning: {}\n", *w);
    const FrameworkProfile profile = framework_flag_profile(opts.framework);
    if (auto problem = framework_problem(profile, c))
        return report_invalid(c, hw, Invalidity{"framework", *problem}, opts.json, profile);
    const Estimate e = estimate(c, hw, o);
    const FrameworkEstimate views = framework_estimate(profile, c, hw, o);
    if (opts.json) {
        nlohmann::json j = estimate_json(c, e);
        j["memory"]["views"] = views_json(views, profile, o);
        if (profile != FrameworkProfile::tune) j["time"]["framework"] = framework_time_json(views, profile);
        j["device"] = hw.device;
        j["usable_memory"] = usable_bytes(c, hw, o);
        fmt::print("{}\n", j.dump(2));
    } else {
        print_single_text(c, hw, e, usable_bytes(c, hw, o), o);
        fmt::print(
            "  as {:<10} allocated {}, reserved {}, device {} (torch.cuda.max_memory_allocated, "
            "max_memory_reserved, nvidia-smi)\n",
            to_string(profile), format_bytes(views.views[MemoryView::allocated]),
            format_bytes(views.views[MemoryView::reserved]), format_bytes(views.views[MemoryView::device]));
        const auto print_terms = [](const std::vector<FrameworkTerm>& terms) {
            for (const FrameworkTerm& t : terms)
                fmt::print("               {}{} {}\n", t.bytes < 0 ? "-" : "+",
                           bytes_text(static_cast<std::uint64_t>(t.bytes < 0 ? -t.bytes : t.bytes)), t.what);
        };
        print_terms(views.terms);
        if (!views.cached.empty()) {
            fmt::print("               reserved beyond allocated (PyTorch's caching allocator):\n");
            print_terms(views.cached);
        }
        if (profile != FrameworkProfile::tune) {
            fmt::print("  as {:<10} step time {:.4g} s, tokens/s {} (all ranks), MFU {}\n", to_string(profile),
                       views.step_s, throughput_text(views.tokens_per_s), percent(views.mfu));
            fmt::print("               {:.4g} s our engine's step with {}'s options\n", views.engine.step_s,
                       to_string(profile));
            for (const FrameworkTimeTerm& t : views.time_terms)
                fmt::print("               {}{:.4g} s {}\n", t.seconds < 0 ? "-" : "+", std::abs(t.seconds), t.what);
        }
        if (e.host_memory.peak > 0) {
            fmt::print("  as {:<10} host {} per rank\n", to_string(profile), format_bytes(views.host));
            print_terms(views.host_terms);
        }
    }
    return e.fits ? kExitOk : kExitNo;
}

// ----------------------------------------------------------- sweep form ----

struct SweepEstimates {
    std::uint64_t total = 0, fit = 0, not_fit = 0, invalid = 0;
    std::vector<const TrialConfig*> configs;  // the valid candidates, with their estimates beside them
    std::vector<Estimate> estimates;
    std::string framework = "tune";               // the stack the counts and the front answer for
    std::vector<FrameworkPrediction> frameworks;  // under a framework: that stack's, by estimate
    std::vector<PredictedRow> rows;
    std::vector<std::size_t> front;  // indices into rows (reports/predicted_front: the sweep's rule too)
};

// "auto" means the GPUs here; without one the spec keeps the cpu preset.
void resolve_device(SweepSpec& spec) {
    if (spec.device != "auto") return;
    const DeviceQuery q = query_devices();
    std::optional<Hardware> detected;
    if (!q.devices.empty()) detected = match_device(q.devices.front().name, q.devices.front().total_memory);
    resolve_auto_device(spec, detected, train::host_total_bytes());
}

// Under a framework (--framework, else the sweep's [framework]) a configuration fits, and the
// front is drawn, by that stack's predicted device memory and tokens/s.
SweepEstimates estimate_sweep(const SweepSpec& spec, const std::vector<Candidate>& candidates, const EstimateOptions& o,
                              FrameworkProfile profile) {
    SweepEstimates out;
    out.total = candidates.size();
    out.estimates.reserve(candidates.size());
    for (const Candidate& cand : candidates) {
        if (!cand.valid()) {
            ++out.invalid;
            continue;
        }
        out.configs.push_back(&cand.config);
        out.estimates.push_back(estimate(spec.model, cand.config, spec.hardware, o));
        bool fits = out.estimates.back().fits;
        if (profile != FrameworkProfile::tune) {
            const FrameworkPredictions p =
                framework_predictions(cand.config, spec.hardware, o, spec.usable_memory(), out.estimates.back());
            out.frameworks.push_back(p.at(std::string(to_string(profile))));
            fits = out.frameworks.back().invalid.empty() && out.frameworks.back().fits;
        }
        ++(fits ? out.fit : out.not_fit);
    }
    out.framework = std::string(to_string(profile));
    const bool engine = profile == FrameworkProfile::tune;
    for (std::size_t i = 0; i < out.configs.size(); ++i)
        out.rows.push_back({out.configs[i], &out.estimates[i], 0, engine ? nullptr : &out.frameworks[i],
                            engine ? std::string() : out.framework});
    out.front = predicted_front(out.rows);
    return out;
}

void print_sweep_text(const SweepSpec& spec, const SweepEstimates& s, const EstimateOptions& o) {
    fmt::print("{}: {} on {} x {} ({}), usable {} per rank ({} limit less {:.0f}% margin)\n", spec.path.string(),
               printable(spec.model.name), spec.world_size(), spec.hardware.device, to_string(spec.hardware.backend),
               format_bytes(spec.usable_memory()), format_bytes(spec.memory_limit()), o.margin * 100);
    fmt::print("  {} configurations: {} fit, {} do not fit, {} invalid\n", s.total, s.fit, s.not_fit, s.invalid);
    fmt::print("{}", predicted_front_text(s.rows, s.front));
}

void print_sweep_json(const SweepSpec& spec, const SweepEstimates& s) {
    nlohmann::json front = nlohmann::json::array();
    for (std::size_t i : s.front) {
        nlohmann::json entry = estimate_json(*s.rows[i].config, *s.rows[i].estimate);
        if (s.rows[i].framework)
            entry["framework"] = {{"name", s.rows[i].framework_name}, {"prediction", *s.rows[i].framework}};
        front.push_back(std::move(entry));
    }
    const nlohmann::json out{{"file", spec.path.string()},
                             {"device", spec.hardware.device},
                             {"usable_memory", spec.usable_memory()},
                             {"combinations", s.total},
                             {"fit", s.fit},
                             {"not_fit", s.not_fit},
                             {"invalid", s.invalid},
                             {"basis", "predicted"},
                             {"framework", s.framework},
                             {"front", front}};
    fmt::print("{}\n", out.dump(2));
}

int run_sweep(const EstimateCliOptions& opts) {
    SweepSpec spec = load_sweep(opts.file);
    resolve_device(spec);
    if (spec.memory_limit_setting)
        if (auto w = limit_above_device(*spec.memory_limit_setting, spec.hardware))
            fmt::print(stderr, "warning: {}\n", *w);
    // The options the sweep itself estimates with, so both print the same front.
    EstimateOptions o = base_estimate_options(spec);
    if (opts.cpu_threads != 0) o.cpu_threads = opts.cpu_threads;
    apply_library_flags(opts, o);
    // --framework F answers for F in place of the sweep's [framework]: what F cannot run is invalid.
    if (!opts.framework.empty()) spec.framework = framework_flag_profile(opts.framework);
    const FrameworkProfile profile = spec.framework;
    const std::vector<Candidate> candidates = expand_space(spec);
    const SweepEstimates s = estimate_sweep(spec, candidates, o, profile);
    if (opts.json)
        print_sweep_json(spec, s);
    else
        print_sweep_text(spec, s, o);
    return s.fit > 0 ? kExitOk : kExitNo;
}

}  // namespace

void add_estimate_command(CLI::App& app, int& exit_code) {
    auto opts = std::make_shared<EstimateCliOptions>();
    auto* cmd = app.add_subcommand(
        "estimate",
        "Predict per-rank memory by component, the peak phase, step time, tokens/s, MFU and whether it fits:\n"
        "  tune estimate --model llama-7b --optimizer adamw --precision bf16-mixed --zero 3 --gpus 8 ...\n"
        "  tune estimate --hf-config Qwen3-8B/config.json ...   a Hugging Face model (Llama, Mistral, Qwen2, Qwen3)\n"
        "  tune estimate sweeps/llama7b.toml     every configuration of a sweep and the predicted front\n"
        "Exit codes: 0 fits (something fits), 1 nothing fits, 2 bad input. Memory model: docs/memory-model.md");
    cmd->add_option("file", opts->file, "Sweep file (TOML): estimate its whole space instead of one configuration");
    auto* model = cmd->add_option("--model", opts->model, "Model preset (tune presets)");
    cmd->add_option("--hf-config", opts->hf_config,
                    "A Hugging Face config.json, or the model folder holding it, instead of --model: head_dim, "
                    "biases, tied embeddings, q/k norms and rope_scaling are read, and a field tune cannot count "
                    "is an error naming it")
        ->excludes(model);
    const TrialConfig defaults = estimate_defaults();
    add_dimension_flags(cmd, opts->dims, &defaults);
    cmd->add_option("--lora-alpha", opts->lora_alpha, "LoRA alpha (default 2 x rank); memory does not depend on it")
        ->check(within(bounds::lora_alpha));
    cmd->add_option("--gpus", opts->gpus, "Ranks (world size)")->check(CLI::PositiveNumber);
    cmd->add_option("--device", opts->device, "Device preset (tune presets)");
    cmd->add_option("--memory-limit", opts->memory_limit, "Bytes per rank, e.g. 40GiB (default: the device's memory)");
    cmd->add_option("--margin", opts->margin, "Fraction of the limit kept free")->check(within(bounds::margin));
    cmd->add_option("--host-memory", opts->host_memory,
                    "Host memory per node for what --offload keeps there, e.g. 256GiB (default: unbounded)");
    cmd->add_option("--host-margin", opts->host_margin, "Fraction of --host-memory kept free")
        ->check(within(bounds::host_margin));
    without_default(cmd->add_option("--cpu-threads", opts->cpu_threads,
                                    "OpenMP threads per rank on the CPU backend (default: 1; for a sweep file, what "
                                    "the sweep uses)"))
        ->check(CLI::PositiveNumber);
    cmd->add_flag("--json", opts->json, "Print JSON instead of tables");
    cmd->add_option(
           "--framework", opts->framework,
           "Predict for the stack you train with (estimate/frameworks): hf-trainer, torchrun, deepspeed, "
           "accelerate-fsdp (transformers' modelling: full-vocabulary fp32 logits, the decoder's saved tensors; "
           "DeepSpeed's fp32 gradient partitions), torchtitan, litgpt (the full-state-dict load under FSDP); FSDP, "
           "DDP and DeepSpeed's ZeRO-3 hide their collectives behind compute, and every stack's eager element-wise "
           "ops add their HBM traffic to the step; tune (default) is tune's engine. Adds memory.views (allocated, "
           "reserved and device) and time.framework")
        ->check(CLI::IsMember(framework_flag_choices()));
    cmd->add_option("--bitsandbytes", opts->bitsandbytes,
                    "The bitsandbytes version under the stack (default: a release after 0.43.1; a sweep's "
                    "[framework] bitsandbytes): before 0.43.2 its 4-bit matmul keeps every QLoRA linear's input "
                    "until backward, which hf-trainer, deepspeed, accelerate-fsdp and litgpt then hold");
    cmd->add_option("--lora-dropout", opts->lora_dropout,
                    "The LoRA dropout your training script runs (default 0.0, as tune's exports write; a sweep's "
                    "[framework] lora_dropout): litgpt keeps each dropout's mask and copy for backward")
        ->check(within(bounds::lora_dropout));
    cmd->add_option("--base-dtype", opts->base_dtype,
                    "The dtype your script loads a LoRA or QLoRA model's frozen base in under bf16-mixed or "
                    "fp16-mixed (from_pretrained's torch_dtype; a sweep's [framework] base_dtype): fp32 (default, as "
                    "tune's exports write: hf-trainer, torchrun and accelerate-fsdp then hold it in fp32, 2 bytes "
                    "more a weight) or 16-bit (torch_dtype=torch.bfloat16, as PEFT's sharded-QLoRA examples load "
                    "it); DeepSpeed casts the model to 16 bits either way")
        ->check(CLI::IsMember(std::vector<std::string>(kBaseDtypeNames.begin(), kBaseDtypeNames.end())));
    cmd->callback([opts, &exit_code] { exit_code = opts->file.empty() ? run_single(*opts) : run_sweep(*opts); });
}

}  // namespace tune::cli
