#include "launch/launch.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

#include "core/environment.h"

namespace tune {
namespace {

// A launcher's rank counts and ids: whole numbers a rank of an int can hold.
std::optional<int> env_int(const char* name) {
    const auto v = environment_integer(name, 0, std::numeric_limits<int>::max());
    return v ? std::optional<int>(static_cast<int>(*v)) : std::nullopt;
}

bool on_path(const std::string& program) {
    const char* path = std::getenv("PATH");
    if (!path) return false;
    std::string_view rest(path);
    while (!rest.empty()) {
        const auto colon = rest.find(':');
        const std::filesystem::path dir(std::string(rest.substr(0, colon)));
        if (::access((dir / program).c_str(), X_OK) == 0) return true;
        if (colon == std::string_view::npos) break;
        rest.remove_prefix(colon + 1);
    }
    return false;
}

}  // namespace

std::string_view to_string(Launcher l) {
    switch (l) {
        case Launcher::local:
            return "local";
        case Launcher::mpirun:
            return "mpirun";
        case Launcher::srun:
            return "srun";
    }
    return "?";
}

RankEnvironment rank_environment() {
    RankEnvironment env;
    if (auto size = env_int("OMPI_COMM_WORLD_SIZE")) {
        env.ranks = *size;
        env.rank = env_int("OMPI_COMM_WORLD_RANK").value_or(0);
        env.local_rank = env_int("OMPI_COMM_WORLD_LOCAL_RANK").value_or(env.rank);
        env.under_launcher = true;
    } else if (auto ntasks = env_int("SLURM_NTASKS"); ntasks && env_int("SLURM_PROCID")) {
        env.ranks = *ntasks;
        env.rank = *env_int("SLURM_PROCID");
        env.local_rank = env_int("SLURM_LOCALID").value_or(env.rank);
        env.under_launcher = true;
    }
    return env;
}

Launcher choose_launcher(std::string_view setting, std::uint32_t ranks) {
    if (ranks <= 1) return Launcher::local;
    if (setting == "auto") return std::getenv("SLURM_JOB_ID") ? Launcher::srun : Launcher::mpirun;
    if (setting == "mpirun" || setting == "local") return Launcher::mpirun;  // "local" N ranks = mpirun on this host
    if (setting == "srun") return Launcher::srun;
    throw std::invalid_argument(fmt::format("unknown launcher '{}'; valid: auto, local, mpirun, srun", setting));
}

std::optional<std::string> launcher_problem(Launcher l) {
    if (l == Launcher::mpirun && !on_path("mpirun"))
        return "mpirun is not on PATH: install OpenMPI (Debian: openmpi-bin) or run single-rank trials";
    if (l == Launcher::srun && !on_path("srun")) return "srun is not on PATH: run inside a Slurm allocation";
    return std::nullopt;
}

std::optional<std::string> placement_problem(Launcher l, std::uint32_t ranks, std::uint32_t nodes) {
    if (l == Launcher::srun) {
        const auto allocated = env_int("SLURM_JOB_NUM_NODES");
        if (allocated && nodes > static_cast<std::uint32_t>(std::max(*allocated, 1)))
            return fmt::format("{} nodes are asked for and the Slurm allocation has {}", nodes, *allocated);
        return launcher_problem(l);
    }
    if (nodes > 1)
        return fmt::format(
            "{} nodes need srun inside a Slurm allocation of {} nodes; {} starts ranks on this host only", nodes, nodes,
            to_string(l));
    if (auto problem = host_ranks_problem(ranks)) return problem;
    return launcher_problem(l);
}

std::optional<std::string> host_ranks_problem(std::uint32_t ranks) {
    if (ranks <= kMaxRanksPerHost) return std::nullopt;
    return fmt::format(
        "{} ranks would run on this one host (at most {}: each rank is a process holding its own "
        "model state); more ranks need srun inside a Slurm allocation",
        ranks, kMaxRanksPerHost);
}

std::vector<std::string> launch_command(Launcher l, std::uint32_t ranks, const std::vector<std::string>& program_argv) {
    std::vector<std::string> argv;
    if (l == Launcher::mpirun) {
        argv = {"mpirun", "-np", std::to_string(ranks)};
        if (::geteuid() == 0) argv.emplace_back("--allow-run-as-root");
        if (ranks > std::thread::hardware_concurrency()) argv.emplace_back("--oversubscribe");
        // Ranks of a trial should not wait for a dead peer forever; the trial timeout still applies.
        argv.insert(argv.end(), {"--mca", "orte_abort_on_non_zero_status", "1"});
    } else if (l == Launcher::srun) {
        argv = {"srun", fmt::format("--ntasks={}", ranks), "--kill-on-bad-exit=1"};
    }
    argv.insert(argv.end(), program_argv.begin(), program_argv.end());
    return argv;
}

std::string self_executable() {
    std::error_code ec;
    auto path = std::filesystem::read_symlink("/proc/self/exe", ec);
    return ec ? std::string("tune") : path.string();
}

}  // namespace tune
