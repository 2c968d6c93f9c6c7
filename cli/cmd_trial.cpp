// `tune trial`: run one configuration for real and print its TrialResult as
// the last stdout line (JSON). Per-step progress goes to stderr.
#include <chrono>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/dimension_flags.h"
#include "cli/number_flags.h"
#include "core/config_error.h"
#include "core/input_file.h"
#include "core/parallel_plan.h"
#include "core/presets.h"
#include "core/trial_protocol.h"
#include "core/units.h"
#include "core/validity.h"
#include "driver/trial_child.h"
#include "kernels/error.h"
#include "launch/launch.h"
#include "launch/process.h"
#include "reports/text_table.h"
#include "train/io/hf_model.h"
#include "train/io/peft_adapter.h"
#include "train/trial.h"

namespace tune::cli {
namespace {

using train::unrun;

// A trial without --config starts from TrialConfig's defaults; the flags start there too, so that
// --help shows them.
const TrialConfig& config_defaults() {
    static const TrialConfig defaults;
    return defaults;
}

struct TrialFlags {
    std::string config_json, model = "tiny", memory_limit, init, tokens, init_adapter, save_adapter;
    DimensionFlags dims;
    std::uint32_t gpus = parallel_plan(config_defaults()).world(), steps = config_defaults().steps,
                  warmup = config_defaults().warmup;
    std::uint32_t adam8bit_block = config_defaults().adam8bit_block;
    std::uint64_t seed = config_defaults().seed;
    double lr = config_defaults().lr, weight_decay = config_defaults().weight_decay, clip = config_defaults().clip,
           neftune_alpha = config_defaults().neftune_alpha;
    std::optional<double> beta1, beta2, eps, lora_alpha;  // unset: the optimizer's values, 2 x rank
    int threads = 0;
    NoiseRule noise;
    std::string backend = std::string(to_string(BackendKind::automatic));
    bool json = false;
    bool force = false;
    bool no_graphs = false;
};

// Every flag given on the command line overrides --config (or the defaults).
struct Given {
    CLI::App* cmd;
    bool operator()(const char* name) const { return cmd->get_option(name)->count() > 0; }
};

ModelSpec model_named(const std::string& name) {
    if (auto m = find_model(name)) return *m;
    throw ConfigError(fmt::format("--model: unknown model \"{}\" (known: {})", name, model_names()));
}

void apply_settings(const TrialFlags& o, const Given& given, TrialConfig& c) {
    o.dims.apply(c);
    if (given("--memory-limit")) {
        c.memory_limit = require_bytes(o.memory_limit, "--memory-limit");
    }
    if (given("--gpus")) c.world_size = o.gpus;
    if (given("--steps")) c.steps = o.steps;
    if (given("--warmup")) c.warmup = o.warmup;
    if (given("--seed")) c.seed = o.seed;
    if (given("--lr")) c.lr = o.lr;
    if (given("--beta1")) c.beta1 = o.beta1;
    if (given("--beta2")) c.beta2 = o.beta2;
    if (given("--eps")) c.eps = o.eps;
    if (given("--weight-decay")) c.weight_decay = o.weight_decay;
    if (given("--clip")) c.clip = o.clip;
    if (given("--neftune-alpha")) c.neftune_alpha = o.neftune_alpha;
    if (given("--adam8bit-block")) c.adam8bit_block = o.adam8bit_block;
    if (given("--lora-alpha")) c.lora_alpha = o.lora_alpha;
}

// --config's JSON: the text itself when it opens an object, else the file it names.
std::pair<std::string, std::string> config_text(const std::string& value) {
    const std::size_t first = value.find_first_not_of(" \t\r\n");
    if (first != std::string::npos && value[first] == '{') return {value, "--config"};
    constexpr std::uint64_t kMaxConfigBytes = 1 << 20;
    return {read_input_file(value, kMaxConfigBytes, "--config file"), fmt::format("--config {}", value)};
}

TrialConfig build_config(const TrialFlags& o, const Given& given) {
    TrialConfig c;
    if (!o.config_json.empty()) {
        const auto [text, source] = config_text(o.config_json);
        try {
            c = nlohmann::json::parse(text).get<TrialConfig>();
        } catch (const nlohmann::json::exception& e) {
            throw ConfigError(fmt::format("{}: {}", source, e.what()));
        }
    } else {
        c.model = model_named(o.model);
    }
    if (given("--model")) c.model = model_named(o.model);
    if (given("--init")) c.model = train::load_hf_config(o.init);
    apply_settings(o, given, c);
    // The adapter folder decides rank, alpha and targets (and lora, unless qlora was asked for).
    if (given("--init-adapter")) train::apply_peft_config(train::load_peft_config(o.init_adapter), c);
    // The default warmup (2) leaves at least one measured step when only --steps is given.
    if (given("--steps") && !given("--warmup") && c.steps > 0 && c.warmup >= c.steps) c.warmup = c.steps - 1;
    return c;
}

// The sweep file's rules for every value a flag gave (core/validity.h): a
// value no configuration may have is bad input; a combination the engine
// cannot run is left to the trial, which reports it as status invalid.
void check_flag_values(const TrialConfig& c, const TrialFlags& o) {
    if (auto bad = threads_problem(o.threads, std::thread::hardware_concurrency())) throw ConfigError(*bad);
    if (auto bad = warmup_problem(c)) throw ConfigError(bad->reason);
    if (auto bad = invalid_reason(c); bad && refuses_input(*bad)) throw ConfigError(bad->reason);
}

BackendKind backend_of(const TrialFlags& o) {
    return *parse_backend(o.backend);  // the flag accepts only the names
}

// TUNE_TRIAL_FAULT=crash|hang|nan|oom|kill|comm-init: test-only faults for the sweep
// driver's tests; "oom-rank-1" and the like fault only rank 1 of a multi-rank trial.
std::string fault() {
    const char* env = std::getenv("TUNE_TRIAL_FAULT");
    const std::string f = env != nullptr ? env : "";
    const std::size_t at = f.find("-rank-");
    if (at == std::string::npos) return f;
    const RankEnvironment here = rank_environment();
    if (!here.under_launcher) return "";
    return f.substr(at + 6) == std::to_string(here.rank) ? f.substr(0, at) : "";
}

void add_flags(CLI::App* cmd, TrialFlags& o) {
    cmd->add_option("--config", o.config_json,
                    "A whole TrialConfig as JSON, or a file holding one (a trial's \"config\" in `tune export "
                    "--format json`); the flags below override it");
    cmd->add_option("--model", o.model, "Model preset (tune presets), default tiny");
    cmd->add_option("--init", o.init, "Hugging Face folder (config.json + model.safetensors): model and weights");
    cmd->add_option("--init-adapter", o.init_adapter,
                    "PEFT LoRA folder (adapter_config.json + adapter_model.safetensors): the adapters to start from; "
                    "sets --method lora (unless qlora), --lora-rank, --lora-alpha and --lora-targets");
    cmd->add_option("--save-adapter", o.save_adapter,
                    "Write the trained adapters here as a PEFT folder at the end (lora, qlora)");
    cmd->add_option("--tokens", o.tokens, "Token file: little-endian uint32 ids (default: seeded synthetic tokens)");
    add_dimension_flags(cmd, o.dims, &config_defaults());
    cmd->add_option("--gpus", o.gpus, "Ranks (world size)");
    cmd->add_option("--steps", o.steps, "Optimizer steps, warmup included");
    cmd->add_option("--warmup", o.warmup, "Steps left out of tokens/s");
    cmd->add_option("--memory-limit", o.memory_limit, "Allocator limit per rank, e.g. 64MiB (default: none on CPU)");
    cmd->add_option("--seed", o.seed, "Seed for weights, data and noise");
    cmd->add_option("--lr", o.lr, "Learning rate (constant)")->check(within(bounds::lr));
    cmd->add_option("--beta1", o.beta1, "beta1 (default: the optimizer's published value)")
        ->check(within(bounds::beta1));
    cmd->add_option("--beta2", o.beta2, "beta2 (default: the optimizer's published value)")
        ->check(within(bounds::beta2));
    cmd->add_option("--eps", o.eps, "epsilon")->check(within(bounds::eps));
    cmd->add_option("--weight-decay", o.weight_decay, "Decoupled weight decay on matrices")
        ->check(within(bounds::weight_decay));
    cmd->add_option("--clip", o.clip, "Global gradient-norm clip; 0 disables")->check(within(bounds::clip));
    cmd->add_option("--neftune-alpha", o.neftune_alpha, "NEFTune noise alpha; 0 disables")
        ->check(within(bounds::neftune_alpha));
    cmd->add_option("--adam8bit-block", o.adam8bit_block, "8-bit Adam block size");
    cmd->add_option("--lora-alpha", o.lora_alpha, "LoRA alpha: adapters scale by alpha / rank (default 2 x rank)")
        ->check(within(bounds::lora_alpha));
    without_default(cmd->add_option("--threads", o.threads, "CPU threads (default: OpenMP's)"));
    cmd->add_option("--max-cv", o.noise.max_cv,
                    "More steps while the timed steps' coefficient of variation (stddev / mean) is above this, "
                    "e.g. 0.05, up to --max-steps (default 0: the configured steps only)")
        ->check(within(bounds::max_cv));
    without_default(cmd->add_option("--max-steps", o.noise.max_steps,
                                    "At most this many steps in all, warm-up included, with --max-cv"));
    cmd->add_option("--backend", o.backend, "auto (CUDA when a device is visible, else the CPU), cpu or cuda")
        ->check(CLI::IsMember({std::string(to_string(BackendKind::automatic)), std::string(to_string(BackendKind::cpu)),
                               std::string(to_string(BackendKind::cuda))}));
    cmd->add_flag("--force", o.force, "Run even when the estimate exceeds the memory the trial may use");
    cmd->add_flag("--no-graphs", o.no_graphs,
                  "On a GPU, launch each micro-batch's kernels one by one instead of replaying them as a CUDA "
                  "graph (to compare the two; the log says which ran and why)");
    cmd->add_flag("--json", o.json, "Print only the result JSON on stdout (progress stays on stderr)");
}

// Outside mpirun/srun, N ranks are this same trial started N times by the
// launcher; rank 0 prints the combined result, read like any trial child's
// (core/trial_protocol.h), and we pass it on with its exit code.
int relaunch(const TrialConfig& config, const TrialFlags& o) {
    auto report = [&](const TrialResult& r) {
        fmt::print("{}\n", result_line(r));
        return trial_exit_code(r.status);
    };
    try {
        train::check_runnable(config);  // no ranks are started for a combination that cannot run
        // One GPU per rank: say so before starting any rank (each rank checks again for its own device).
        const int ranks = static_cast<int>(parallel_plan(config).world());
        if (train::uses_cuda(backend_of(o))) train::check_gpu_for_rank(ranks - 1, ranks);
    } catch (...) {
        return report(train::result_of_current_exception(config));
    }
    const Launcher launcher = choose_launcher("auto", parallel_plan(config).world());
    // Bad input, before mpirun is asked to start a hundred thousand processes.
    if (launcher != Launcher::srun)
        if (auto problem = host_ranks_problem(parallel_plan(config).world())) throw ConfigError("--gpus: " + *problem);
    if (auto problem = launcher_problem(launcher)) return report(unrun(config, TrialStatus::failed, *problem));
    // Every rank starts from the same adapters; rank 0 writes them back (run_trial).
    const TrialChildFlags flags{o.init,  o.tokens,       o.threads,      backend_of(o), false,
                                o.force, o.init_adapter, o.save_adapter, o.noise,       o.no_graphs};
    ProcessSpec spec;
    spec.argv = launch_command(launcher, parallel_plan(config).world(),
                               trial_child_argv({self_executable(), "trial"}, config, flags));
    fmt::print(stderr, "trial: {} ranks via {}\n", parallel_plan(config).world(), to_string(launcher));
    const ProcessOutcome out = run_process(spec);
    fmt::print(stderr, "{}", out.stderr_tail);
    return report(read_child_result(out.stdout_text, child_end(out), config));
}

}  // namespace

void add_trial_command(CLI::App& app, int& exit_code) {
    auto opts = std::make_shared<TrialFlags>();
    auto* cmd = app.add_subcommand(
        "trial",
        "Run one configuration for real: per-step loss, time, memory and MFU on stderr, then one JSON\n"
        "TrialResult as the last stdout line.\n"
        "Exit codes: 0 ok, 2 bad flags, 3 oom, 4 invalid combination, 5 failed.");
    add_flags(cmd, *opts);
    cmd->callback([opts, cmd, &exit_code] {
        const TrialFlags& o = *opts;
        const TrialConfig config = build_config(o, Given{cmd});
        check_flag_values(config, o);
        if (!o.save_adapter.empty()) train::check_adapter_destination(o.save_adapter);
        const std::string f = fault();
        if (f == "crash") std::abort();
        if (f == "hang")
            for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
        if (parallel_plan(config).world() > 1 && !rank_environment().under_launcher) {
            exit_code = relaunch(config, o);
            return;
        }
        // Under a launcher every rank runs the trial; only rank 0 reports.
        const bool reporter = rank_environment().rank == 0;
        train::TrialOptions run;
        if (!o.init.empty()) run.init_dir = o.init;
        if (!o.tokens.empty()) run.tokens_file = o.tokens;
        if (!o.init_adapter.empty()) run.init_adapter_dir = o.init_adapter;
        if (!o.save_adapter.empty()) run.save_adapter_dir = o.save_adapter;
        run.threads = o.threads;
        run.noise = o.noise;
        run.backend = backend_of(o);
        run.force = o.force;
        run.graphs = !o.no_graphs;
        run.fault_nan = f == "nan";
        run.fault_oom = f == "oom";
        run.fault_kill = f == "kill";
        run.fault_comm_init = f == "comm-init";
        if (!reporter) run.log = nullptr;
        // A failing rank reports for the job: the others may be waiting in a collective.
        run.on_rank_failure = [](const TrialResult& failed) {
            // Reasons and names can carry text from config.json or flags: escaped for the terminal.
            fmt::print(stderr, "trial {}: {}\n", to_string(failed.status), printable(failed.reason, "\n"));
            fmt::print("{}\n", result_line(failed));
            std::fflush(stdout);
            std::fflush(stderr);
            return trial_exit_code(failed.status);
        };
        if (reporter) fmt::print(stderr, "trial: {} on {}\n", summary(config), printable(config.model.name));
        const TrialResult r = train::run_trial(config, run);
        if (r.status != TrialStatus::ok)
            fmt::print(stderr, "trial {}: {}\n", to_string(r.status), printable(r.reason, "\n"));
        if (reporter) fmt::print("{}\n", result_line(r));
        exit_code = trial_exit_code(r.status);
    });
}

}  // namespace tune::cli
