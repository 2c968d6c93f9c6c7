// `tune trial`: run one configuration for real and print its TrialResult as
// the last stdout line (JSON). Per-step progress goes to stderr.
#include <chrono>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "harness/cli/commands.h"
#include "harness/hf_model.h"
#include "harness/launch/launch.h"
#include "harness/launch/process.h"
#include "harness/trial.h"
#include "search/config_error.h"
#include "kernels/error.h"
#include "search/presets.h"
#include "search/units.h"

namespace tune::cli {
namespace {

using harness::unrun;

// Exit codes of `tune trial`, one per status (search/config.h; 1 and 2 keep their meaning from commands.h).
constexpr int kExitInvalid = kTrialExitInvalid;
constexpr int kExitFailed = kTrialExitFailed;

struct TrialFlags {
    std::string config_json, model = "tiny", optimizer, precision, checkpointing, memory_limit, init, tokens;
    std::uint32_t zero = 0, gpus = 1, micro_batch = 1, context = 128, grad_accum = 1, steps = 6, warmup = 2;
    std::uint32_t adam8bit_block = 256;
    std::uint64_t seed = 1234;
    double lr = 0, beta1 = 0, beta2 = 0, eps = 0, weight_decay = 0, clip = 0, neftune_alpha = 0;
    int threads = 0;
    std::string backend = "auto";
    bool json = false;
};

// Every flag given on the command line overrides --config (or the defaults).
struct Given {
    CLI::App* cmd;
    bool operator()(const char* name) const { return cmd->get_option(name)->count() > 0; }
};

template <class Enum>
Enum parse_flag(std::optional<Enum> parsed, const std::string& flag, const std::string& text) {
    if (!parsed) throw ConfigError(fmt::format("{}: unknown value \"{}\"", flag, text));
    return *parsed;
}

ModelSpec model_named(const std::string& name) {
    if (auto m = find_model(name)) return *m;
    throw ConfigError(fmt::format("--model: unknown model \"{}\" (known: {})", name, model_names()));
}

void apply_enums(const TrialFlags& o, const Given& given, TrialConfig& c) {
    if (given("--optimizer")) c.optimizer = parse_flag(parse_optimizer(o.optimizer), "--optimizer", o.optimizer);
    if (given("--precision")) c.precision = parse_flag(parse_precision(o.precision), "--precision", o.precision);
    if (given("--checkpointing"))
        c.checkpointing = parse_flag(parse_checkpointing(o.checkpointing), "--checkpointing", o.checkpointing);
    if (given("--memory-limit")) {
        auto bytes = parse_bytes(o.memory_limit);
        if (!bytes) throw ConfigError(fmt::format("--memory-limit: cannot read \"{}\" as a size", o.memory_limit));
        c.memory_limit = *bytes;
    }
}

void apply_numbers(const TrialFlags& o, const Given& given, TrialConfig& c) {
    if (given("--zero")) c.zero_stage = o.zero;
    if (given("--gpus")) c.world_size = o.gpus;
    if (given("--micro-batch")) c.micro_batch = o.micro_batch;
    if (given("--context")) c.context = o.context;
    if (given("--grad-accum")) c.grad_accum = o.grad_accum;
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
}

TrialConfig build_config(const TrialFlags& o, const Given& given) {
    TrialConfig c;
    if (!o.config_json.empty()) {
        try {
            c = nlohmann::json::parse(o.config_json).get<TrialConfig>();
        } catch (const nlohmann::json::exception& e) {
            throw ConfigError(fmt::format("--config: {}", e.what()));
        }
    } else {
        c.model = model_named(o.model);
    }
    if (given("--model")) c.model = model_named(o.model);
    if (given("--init")) c.model = harness::load_hf_config(o.init);
    apply_enums(o, given, c);
    apply_numbers(o, given, c);
    return c;
}

int exit_code_for(TrialStatus s) { return trial_exit_code(s); }

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
    cmd->add_option("--config", o.config_json, "A whole TrialConfig as JSON; the flags below override it");
    cmd->add_option("--model", o.model, "Model preset (tune presets), default tiny");
    cmd->add_option("--init", o.init, "Hugging Face folder (config.json + model.safetensors): model and weights");
    cmd->add_option("--tokens", o.tokens, "Token file: little-endian uint32 ids (default: seeded synthetic tokens)");
    cmd->add_option("--optimizer", o.optimizer, "adamw | lion | adam8bit | adafactor | lomo");
    cmd->add_option("--precision", o.precision, "fp32 | bf16-mixed | fp16-mixed | bf16");
    cmd->add_option("--zero", o.zero, "ZeRO stage 0-3");
    cmd->add_option("--gpus", o.gpus, "Ranks (world size)");
    cmd->add_option("--micro-batch", o.micro_batch, "Rows per micro-batch per rank");
    cmd->add_option("--context", o.context, "Tokens per row");
    cmd->add_option("--grad-accum", o.grad_accum, "Micro-batches per optimizer step");
    cmd->add_option("--checkpointing", o.checkpointing, "none | selective | full");
    cmd->add_option("--steps", o.steps, "Optimizer steps, warmup included");
    cmd->add_option("--warmup", o.warmup, "Steps left out of tokens/s");
    cmd->add_option("--memory-limit", o.memory_limit, "Allocator limit per rank, e.g. 64MiB (default: none on CPU)");
    cmd->add_option("--seed", o.seed, "Seed for weights, data and noise");
    cmd->add_option("--lr", o.lr, "Learning rate (constant)");
    cmd->add_option("--beta1", o.beta1, "beta1 (default: the optimizer's published value)");
    cmd->add_option("--beta2", o.beta2, "beta2 (default: the optimizer's published value)");
    cmd->add_option("--eps", o.eps, "epsilon");
    cmd->add_option("--weight-decay", o.weight_decay, "Decoupled weight decay on matrices");
    cmd->add_option("--clip", o.clip, "Global gradient-norm clip; 0 disables");
    cmd->add_option("--neftune-alpha", o.neftune_alpha, "NEFTune noise alpha; 0 disables");
    cmd->add_option("--adam8bit-block", o.adam8bit_block, "8-bit Adam block size");
    cmd->add_option("--threads", o.threads, "CPU threads (default: OpenMP's)");
    cmd->add_option("--backend", o.backend, "auto (CUDA when a device is visible, else the CPU), cpu or cuda")
        ->check(CLI::IsMember({"auto", "cpu", "cuda"}))
        ->capture_default_str();
    cmd->add_flag("--json", o.json, "Print only the result JSON on stdout (progress stays on stderr)");
}

// Outside mpirun/srun, N ranks are this same trial started N times by the
// launcher; rank 0 prints the combined result, which we pass on with its exit code.
int relaunch(const TrialConfig& config, const TrialFlags& o) {
    try {
        harness::check_runnable(config);  // no ranks are started for a combination that cannot run
    } catch (const harness::InvalidTrial& e) {
        fmt::print("{}\n", nlohmann::json(unrun(config, TrialStatus::invalid, e.what())).dump());
        return kExitInvalid;
    }
    // One GPU per rank: say so before starting any rank (each rank checks again for its own device).
    try {
        const int ranks = static_cast<int>(config.world_size);
        if (harness::uses_cuda(o.backend)) harness::check_gpu_for_rank(ranks - 1, ranks);
    } catch (const BackendError& e) {
        fmt::print("{}\n", nlohmann::json(unrun(config, TrialStatus::failed, e.what())).dump());
        return kExitFailed;
    }
    const Launcher launcher = choose_launcher("auto", config.world_size);
    if (auto problem = launcher_problem(launcher)) {
        fmt::print("{}\n", nlohmann::json(unrun(config, TrialStatus::failed, *problem)).dump());
        return kExitFailed;
    }
    std::vector<std::string> argv{self_executable(), "trial", "--config", nlohmann::json(config).dump()};
    if (!o.init.empty()) argv.insert(argv.end(), {"--init", o.init});
    if (!o.tokens.empty()) argv.insert(argv.end(), {"--tokens", o.tokens});
    if (o.threads > 0) argv.insert(argv.end(), {"--threads", std::to_string(o.threads)});
    argv.insert(argv.end(), {"--backend", o.backend});
    ProcessSpec spec;
    spec.argv = launch_command(launcher, config.world_size, argv);
    fmt::print(stderr, "trial: {} ranks via {}\n", config.world_size, to_string(launcher));
    const ProcessOutcome out = run_process(spec);
    fmt::print(stderr, "{}", out.stderr_tail);
    const bool printed = out.stdout_text.find('{') != std::string::npos;
    if (out.exit_code < 0 || !printed) {
        // A rank that ran out of memory aborts the job with exit code 3; its line may not get through.
        const bool oom = out.term_signal == 0 && out.exit_code == kTrialExitOom;
        const std::string why = (oom ? "a rank ran out of memory and ended the job: " : "ranks ended without a result: ") + out.describe();
        const TrialStatus status = oom ? TrialStatus::oom : TrialStatus::failed;
        fmt::print("{}\n", nlohmann::json(unrun(config, status, why)).dump());
        return exit_code_for(status);
    }
    fmt::print("{}", out.stdout_text);
    return out.exit_code;
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
        const std::string f = fault();
        if (f == "crash") std::abort();
        if (f == "hang")
            for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
        if (config.world_size > 1 && !rank_environment().under_launcher) {
            exit_code = relaunch(config, o);
            return;
        }
        // Under a launcher every rank runs the trial; only rank 0 reports.
        const bool reporter = rank_environment().rank == 0;
        harness::TrialOptions run;
        if (!o.init.empty()) run.init_dir = o.init;
        if (!o.tokens.empty()) run.tokens_file = o.tokens;
        run.threads = o.threads;
        run.backend = o.backend;
        run.fault_nan = f == "nan";
        run.fault_oom = f == "oom";
        run.fault_kill = f == "kill";
        run.fault_comm_init = f == "comm-init";
        if (!reporter) run.log = nullptr;
        // A failing rank reports for the job: the others may be waiting in a collective.
        run.on_rank_failure = [](const TrialResult& failed) {
            fmt::print(stderr, "trial {}: {}\n", to_string(failed.status), failed.reason);
            fmt::print("{}\n", nlohmann::json(failed).dump());
            std::fflush(stdout);
            std::fflush(stderr);
            return exit_code_for(failed.status);
        };
        if (reporter) fmt::print(stderr, "trial: {} on {}\n", summary(config), config.model.name);
        const TrialResult r = harness::run_trial(config, run);
        if (r.status != TrialStatus::ok) fmt::print(stderr, "trial {}: {}\n", to_string(r.status), r.reason);
        if (reporter) fmt::print("{}\n", nlohmann::json(r).dump());
        exit_code = exit_code_for(r.status);
    });
}

}  // namespace tune::cli
