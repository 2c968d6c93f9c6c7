// `tune selftest [--device N] [--json] [--op NAME]`: every backend op on
// random inputs, then three training steps per optimizer and precision,
// CUDA against the CPU backend, one table row per case.
// `tune selftest --gpus N` (N > 1): a two-step trial at every ZeRO stage on
// N GPUs (NCCL), compared with one CPU process holding the global batch, one
// row per stage; outside mpirun/srun it re-launches itself as N ranks.
// Exit 0 when all pass (or when there is no GPU: every case is listed as
// skipped and the reason said), 1 when any case fails or errors.
// --require-gpu makes "no GPU" exit 1 too: a first run on a new machine
// whose driver sees no usable device must not read as a pass.
#include <cstdio>
#include <exception>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "core/units.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/device_query.h"
#include "kernels/selftest/selftest.h"
#include "launch/launch.h"
#include "launch/process.h"
#include "reports/text_table.h"
#include "train/comm/comm_nccl.h"
#include "train/comm/mpi_runtime.h"
#include "train/selftest_training.h"

namespace tune::cli {
namespace {

namespace st = kernels::selftest;

struct SelftestOptions {
    int device = 0;
    std::uint32_t gpus = 1;  // > 1: the ZeRO stages across that many GPU ranks
    bool json = false;
    std::string op;                  // only cases whose op contains this
    std::string candidate = "cuda";  // "cpu" compares the CPU backend with itself (checks the harness)
    bool require_gpu = false;        // no usable GPU is a failure, not a skip
    std::uint64_t seed = 20240611;
};

std::string number(double v) { return fmt::format("{:.2e}", v); }

void print_table(const std::vector<st::CaseResult>& results) {
    TextTable table({"op", "dtype", "shape", "output", "nmse", "max err", "tol nmse", "tol max", "result"});
    for (const auto& r : results) {
        const st::OutputResult* w = r.worst();
        if (w == nullptr) {
            table.add_row({r.op, r.dtype, r.shape, "", "", "", "", "", std::string(st::status_name(r.status))});
            continue;
        }
        table.add_row({r.op, r.dtype, r.shape, w->name, number(w->stats.nmse), number(w->stats.max_abs),
                       number(w->tolerance.max_nmse), number(w->tolerance.max_abs),
                       std::string(st::status_name(r.status))});
    }
    fmt::print("{}", table.render());
    for (const auto& r : results)
        if (r.status == st::Status::error) fmt::print("error: {} {} {}: {}\n", r.op, r.dtype, r.shape, r.message);
}

nlohmann::json to_json(const st::CaseResult& r) {
    nlohmann::json outputs = nlohmann::json::array();
    for (const auto& o : r.outputs)
        outputs.push_back({{"name", o.name},
                           {"dtype", kernels::dtype_name(o.dtype)},
                           {"class", st::op_class_name(o.op_class)},
                           {"nmse", o.stats.nmse},
                           {"max_abs", o.stats.max_abs},
                           {"worst_index", o.stats.worst},
                           {"nonfinite_mismatches", o.stats.mismatched_nonfinite},
                           {"tol_nmse", o.tolerance.max_nmse},
                           {"tol_max_abs", o.tolerance.max_abs},
                           {"pass", o.pass}});
    nlohmann::json j{{"op", r.op},
                     {"dtype", r.dtype},
                     {"shape", r.shape},
                     {"status", st::status_name(r.status)},
                     {"outputs", outputs}};
    if (!r.message.empty()) j["message"] = r.message;
    return j;
}

struct Tally {
    int pass = 0, fail = 0, error = 0, skipped = 0;
    explicit Tally(const std::vector<st::CaseResult>& results) {
        for (const auto& r : results) {
            if (r.status == st::Status::pass)
                ++pass;
            else if (r.status == st::Status::fail)
                ++fail;
            else if (r.status == st::Status::error)
                ++error;
            else
                ++skipped;
        }
    }
};

void report(const std::vector<st::CaseResult>& results, const std::string& against, const std::string& note,
            const SelftestOptions& o) {
    const Tally t(results);
    if (o.json) {
        nlohmann::json cases = nlohmann::json::array();
        for (const auto& r : results) cases.push_back(to_json(r));
        nlohmann::json out{{"reference", "cpu"}, {"candidate", against}, {"seed", o.seed},       {"passed", t.pass},
                           {"failed", t.fail},   {"errors", t.error},    {"skipped", t.skipped}, {"cases", cases}};
        if (!note.empty()) out["note"] = note;
        fmt::print("{}\n", out.dump(2));
        return;
    }
    if (!note.empty()) fmt::print("{}\n", note);
    print_table(results);
    fmt::print("{} cases: {} passed, {} failed, {} errors, {} skipped (reference cpu, candidate {})\n", results.size(),
               t.pass, t.fail, t.error, t.skipped, against);
}

// Why the CUDA candidate cannot run here, or empty when it can.
std::string why_no_gpu(int device) {
    if (!kernels::cuda_backend_compiled()) return "this build of tune has no CUDA backend";
    const DeviceQuery q = query_devices();
    if (q.devices.empty()) return "no CUDA device: " + q.why_none;
    if (device < 0 || device >= static_cast<int>(q.devices.size()))
        return fmt::format("no CUDA device {} ({} visible)", device, q.devices.size());
    return {};
}

std::string memory_note(const kernels::Backend& backend) {
    const auto m = kernels::cuda_memory_stats(backend);
    if (!m) return {};
    return fmt::format("device memory: context {}, cuBLASLt {}, backend scratch {}, pool high-water {} (of {})",
                       format_bytes(m->context_bytes), format_bytes(m->cublas_bytes), format_bytes(m->backend_bytes),
                       format_bytes(m->pool_reserved_high_bytes), format_bytes(m->total_bytes));
}

int run_selftest(const SelftestOptions& o) {
    std::vector<st::Case> all = st::standard_cases();
    for (auto& c : train::training_cases()) all.push_back(std::move(c));
    const std::vector<st::Case> cases = st::filter_cases(std::move(all), o.op);
    std::vector<st::CaseResult> results;
    const bool on_cpu = o.candidate == "cpu";
    const std::string why = on_cpu ? std::string() : why_no_gpu(o.device);
    if (!why.empty()) {
        for (const auto& c : cases) results.push_back(st::skipped_case(c, why));
        report(results, fmt::format("cuda:{}", o.device), why + "; every case is skipped", o);
        return o.require_gpu ? kExitNo : kExitOk;
    }
    kernels::CpuBackend reference;
    std::unique_ptr<kernels::Backend> candidate =
        on_cpu ? std::make_unique<kernels::CpuBackend>() : kernels::make_cuda_backend(o.device);
    for (const auto& c : cases) results.push_back(st::run_case(c, reference, *candidate, o.seed));
    report(results, std::string(candidate->name()), memory_note(*candidate), o);
    const Tally t(results);
    return t.fail + t.error == 0 ? kExitOk : kExitNo;
}

// ---- --gpus N: ZeRO stages across GPU ranks against the CPU --------------

std::string gpus_candidate(std::uint32_t gpus) { return fmt::format("cuda x{} (nccl)", gpus); }

// Why N GPU ranks cannot run here, or empty when they can.
std::string why_no_gpus(std::uint32_t gpus) {
    if (!kernels::cuda_backend_compiled() || !train::nccl_compiled())
        return "this build of tune has no CUDA backend (and no NCCL)";
    const DeviceQuery q = query_devices();
    if (q.devices.empty()) return "no CUDA device: " + q.why_none;
    // mpirun starts every rank on this host, and NCCL wants one GPU per rank.
    if (choose_launcher("auto", gpus) == Launcher::mpirun && q.devices.size() < gpus)
        return fmt::format("--gpus {} needs {} CUDA devices on this host, {} visible", gpus, gpus, q.devices.size());
    return {};
}

std::string diff_text(double v) { return fmt::format("{:.2e}", v); }

void report_stages(const std::vector<train::ZeroStageResult>& rows, const std::string& why_skipped,
                   const SelftestOptions& o) {
    int pass = 0, fail = 0, skipped = 0;
    for (const auto& r : rows) {
        if (!why_skipped.empty())
            ++skipped;
        else if (r.pass)
            ++pass;
        else
            ++fail;
    }
    const std::string reference = fmt::format("cpu (1 process, micro-batch {})", o.gpus);
    if (o.json) {
        nlohmann::json stages = nlohmann::json::array();
        for (const auto& r : rows) {
            nlohmann::json j{{"stage", r.stage}, {"ranks", r.ranks}};
            if (!why_skipped.empty()) {
                j["status"] = "skipped";
            } else {
                j.update({{"status", r.pass ? "pass" : "fail"},
                          {"max_param_diff", r.param_diff},
                          {"max_loss_diff", r.loss_diff},
                          {"moved", r.moved},
                          {"tol_param", r.param_tolerance},
                          {"tol_loss", r.loss_tolerance}});
                if (!r.error.empty()) j["message"] = r.error;
            }
            stages.push_back(j);
        }
        nlohmann::json out{{"reference", reference}, {"candidate", gpus_candidate(o.gpus)},
                           {"gpus", o.gpus},         {"seed", o.seed},
                           {"passed", pass},         {"failed", fail},
                           {"skipped", skipped},     {"stages", stages}};
        if (!why_skipped.empty()) out["note"] = why_skipped + "; every case is skipped";
        fmt::print("{}\n", out.dump(2));
        return;
    }
    if (!why_skipped.empty()) fmt::print("{}; every case is skipped\n", why_skipped);
    TextTable table(
        {"case", "ranks", "max |diff| params", "max |diff| losses", "moved", "tol params", "tol losses", "result"});
    for (const auto& r : rows) {
        const std::string name = fmt::format("zero{}/adamw fp32 2 steps", r.stage);
        if (!why_skipped.empty()) {
            table.add_row({name, std::to_string(r.ranks), "", "", "", "", "", "skipped"});
            continue;
        }
        table.add_row({name, std::to_string(r.ranks), diff_text(r.param_diff), diff_text(r.loss_diff),
                       diff_text(r.moved), diff_text(r.param_tolerance), diff_text(r.loss_tolerance),
                       r.pass ? "pass" : "fail"});
    }
    fmt::print("{}", table.render());
    for (const auto& r : rows)
        if (!r.error.empty()) fmt::print("error: zero{}: {}\n", r.stage, r.error);
    fmt::print("{} cases: {} passed, {} failed, {} skipped (reference {}, candidate {})\n", rows.size(), pass, fail,
               skipped, reference, gpus_candidate(o.gpus));
}

std::vector<train::ZeroStageResult> unrun_stages(std::uint32_t gpus) {
    std::vector<train::ZeroStageResult> rows;
    for (std::uint32_t stage = 0; stage <= 3; ++stage) {
        train::ZeroStageResult r;
        r.stage = stage;
        r.ranks = static_cast<int>(gpus);
        rows.push_back(r);
    }
    return rows;
}

// Outside a launcher: this command again as N ranks; rank 0's report and exit code are ours.
int relaunch_selftest(const SelftestOptions& o) {
    const Launcher launcher = choose_launcher("auto", o.gpus);
    if (auto problem = launcher_problem(launcher)) {
        fmt::print(stderr, "selftest: cannot start {} ranks: {}\n", o.gpus, *problem);
        return kExitNo;
    }
    std::vector<std::string> argv{self_executable(),      "selftest", "--gpus",
                                  std::to_string(o.gpus), "--seed",   std::to_string(o.seed)};
    if (o.json) argv.emplace_back("--json");
    ProcessSpec spec;
    spec.argv = launch_command(launcher, o.gpus, argv);
    fmt::print(stderr, "selftest: {} ranks via {}\n", o.gpus, to_string(launcher));
    const ProcessOutcome out = run_process(spec);
    fmt::print(stderr, "{}", out.stderr_tail);
    fmt::print("{}", out.stdout_text);
    if (out.exit_code < 0) {
        fmt::print(stderr, "selftest: the ranks ended without a verdict: {}\n", out.describe());
        return kExitNo;
    }
    return out.exit_code;
}

// One rank of N: its GPU (local rank), NCCL, the stages; rank 0 reports.
int run_selftest_rank(const SelftestOptions& o) {
    const train::MpiRuntime runtime;
    try {
        if (runtime.world_size() != static_cast<int>(o.gpus))
            throw std::runtime_error(fmt::format("--gpus {} but this job has {} ranks", o.gpus, runtime.world_size()));
        const RankEnvironment env = rank_environment();
        const std::size_t devices = query_devices().devices.size();
        if (static_cast<std::size_t>(env.local_rank) >= devices)
            throw std::runtime_error(
                fmt::format("local rank {} has no GPU of its own ({} visible; NCCL needs one "
                            "per rank)",
                            env.local_rank, devices));
        std::unique_ptr<kernels::Backend> backend = kernels::make_cuda_backend(env.local_rank);
        std::unique_ptr<train::Comm> comm = train::make_nccl_comm(runtime, env.local_rank, backend.get());
        train::ZeroSelftestOptions zo;
        zo.seed = o.seed;
        const std::vector<train::ZeroStageResult> rows = train::zero_stages_against_cpu(*backend, *comm, zo);
        if (runtime.rank() != 0) return kExitOk;  // rank 0's exit code is the job's
        report_stages(rows, "", o);
        std::fflush(stdout);
        for (const auto& r : rows)
            if (!r.pass) return kExitNo;
        return kExitOk;
    } catch (const std::exception& e) {
        // The other ranks may be waiting in a collective: end the whole job.
        fmt::print(stderr, "selftest: rank {} of {}: {}\n", runtime.rank(), runtime.world_size(), e.what());
        std::fflush(stdout);
        std::fflush(stderr);
        runtime.abort_job(kExitNo);
    }
}

int run_selftest_gpus(const SelftestOptions& o) {
    const RankEnvironment env = rank_environment();
    if (!env.under_launcher) {
        const std::string why = why_no_gpus(o.gpus);
        if (!why.empty()) {
            report_stages(unrun_stages(o.gpus), why, o);
            return o.require_gpu ? kExitNo : kExitOk;
        }
        return relaunch_selftest(o);
    }
    return run_selftest_rank(o);
}

}  // namespace

void add_selftest_command(CLI::App& app, int& exit_code) {
    auto* cmd = app.add_subcommand("selftest",
                                   "Run every backend op on the GPU and the CPU and compare (exit 1 on any "
                                   "failure; without a GPU every case is skipped and the exit is 0).");
    auto o = std::make_shared<SelftestOptions>();
    cmd->add_option("--device", o->device, "CUDA device index");
    cmd->add_flag("--json", o->json, "Print one JSON object");
    cmd->add_option("--op", o->op, "Only cases whose op name contains this (e.g. attention, adam, train)");
    cmd->add_option("--candidate", o->candidate, "Backend compared with the CPU: cuda, or cpu to check the harness")
        ->check(CLI::IsMember({"cuda", "cpu"}));
    cmd->add_option("--seed", o->seed, "Seed of the random inputs");
    cmd->add_flag("--require-gpu", o->require_gpu,
                  "Exit 1 when no usable GPU is found instead of skipping every case (for first runs and CI on GPUs)");
    cmd->add_option("--gpus", o->gpus,
                    "More than 1: a 2-step trial at every ZeRO stage on this many GPUs (NCCL, one rank per GPU, "
                    "started through mpirun/srun) against one CPU process with the whole batch")
        ->check(CLI::Range(1u, 1024u));
    cmd->callback([&exit_code, o] { exit_code = o->gpus > 1 ? run_selftest_gpus(*o) : run_selftest(*o); });
}

}  // namespace tune::cli
