// `tune probe-collectives` (hidden): one rank of the collective bus-bandwidth
// probes, started under mpirun or srun by driver/collective_probes at each of
// a sweep's world sizes. MPI between CPU ranks, NCCL between GPU ranks (one
// device per local rank); rank 0 prints the measured rates as one JSON line.
#include <functional>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "cli/commands.h"
#include "core/config_error.h"
#include "driver/collective_probes.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "launch/launch.h"
#include "probe/probe_timing.h"
#include "train/comm/collective_probe.h"
#include "train/comm/comm_mpi.h"
#include "train/comm/comm_nccl.h"
#include "train/comm/mpi_runtime.h"

namespace tune::cli {
namespace {

struct CollectiveChildOptions {
    std::string plan;
    double min_time = 0.02;
    std::string backend = "cpu";
    int threads = 1;
};

int run_collectives_child(const CollectiveChildOptions& o) {
    const RankEnvironment env = rank_environment();
    if (!env.under_launcher)
        throw ConfigError(
            "tune probe-collectives runs as the ranks of an mpirun or srun job (tune probe and "
            "tune sweep --probe start it); run `tune probe FILE` instead");
    const std::vector<CollectiveRate> plan = parse_collective_plan(o.plan);
    const train::MpiRuntime runtime;
    const bool gpu = o.backend == "cuda";
    // The backend before the communicator, so the communicator is destroyed first.
    std::unique_ptr<kernels::Backend> backend =
        gpu ? kernels::make_cuda_backend(env.local_rank)
            : std::make_unique<kernels::CpuBackend>(kernels::CpuBackendOptions{o.threads, 0});
    std::unique_ptr<train::Comm> comm =
        gpu ? train::make_nccl_comm(runtime, env.local_rank, backend.get()) : std::make_unique<train::MpiComm>(runtime);
    // Each call after a GEMM, with the core's cache displaced, as a step makes it
    // (probe/probe_timing.h gemm_primer, cache_displacer).
    const std::function<void()> gemm = probe::gemm_primer(*backend);
    const std::function<void()> displace = probe::cache_displacer(*backend);
    const std::function<void()> primer = [&] {
        gemm();
        displace();
    };
    std::vector<probe::CollectiveResult> results;
    for (const auto& t : train::time_collectives(*comm, *backend, plan, o.min_time, primer))
        results.push_back({t.rate, t.seconds});
    if (comm->rank() == 0) fmt::print("{}\n", collective_result_line(results));
    return kExitOk;
}

}  // namespace

void add_probe_collectives_command(CLI::App& app, int& exit_code) {
    auto* cmd = app.add_subcommand("probe-collectives",
                                   "One rank of the collective bus-bandwidth probes (started by tune probe and "
                                   "tune sweep --probe under mpirun or srun)");
    cmd->group("");  // hidden: not a command users start
    auto o = std::make_shared<CollectiveChildOptions>();
    cmd->add_option("--plan", o->plan,
                    "JSON list of collective probe keys, e.g. "
                    "[{\"bytes\":262144,\"dtype\":\"f32\",\"op\":\"all-reduce\",\"probe\":\"collective\",\"ranks\":2}]")
        ->required();
    cmd->add_option("--min-time", o->min_time, "Seconds each probe's timed batch lasts at least")
        ->check(CLI::Range(0.001, 10.0));
    cmd->add_option("--backend", o->backend, "cpu (MPI) or cuda (NCCL)")->check(CLI::IsMember({"cpu", "cuda"}));
    cmd->add_option("--threads", o->threads, "CPU threads per rank")->check(CLI::PositiveNumber);
    cmd->callback([&exit_code, o] { exit_code = run_collectives_child(*o); });
}

}  // namespace tune::cli
