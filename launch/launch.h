// How a trial of N ranks is started: in this process's child directly (one
// rank), under mpirun (OpenMPI, local), or under srun (inside a Slurm
// allocation). Used by the sweep driver and by `tune trial --gpus N`, which
// re-launches itself through mpirun/srun when it is not already under one.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tune {

enum class Launcher { local, mpirun, srun };

std::string_view to_string(Launcher l);

// Where this process stands: set by OpenMPI (OMPI_COMM_WORLD_*) or Slurm (SLURM_*).
struct RankEnvironment {
    int rank = 0;
    int ranks = 1;
    int local_rank = 0;
    bool under_launcher = false;  // started by mpirun or srun
};
RankEnvironment rank_environment();

// "auto": srun inside a Slurm allocation, else mpirun for more than one rank,
// else local. An explicit setting is honoured, except that one rank never needs a launcher.
// Throws std::invalid_argument for an unknown setting.
Launcher choose_launcher(std::string_view setting, std::uint32_t ranks);

// Why the launcher cannot be used here ("mpirun is not on PATH: install openmpi-bin"), or nullopt.
std::optional<std::string> launcher_problem(Launcher l);

// Each rank is a process with its own copy of the model's state; more than this many on one
// host is a typo or a cluster's numbers, never something one machine can start.
inline constexpr std::uint32_t kMaxRanksPerHost = 256;
// Why `ranks` ranks cannot all start on this host (more than kMaxRanksPerHost), or nullopt.
std::optional<std::string> host_ranks_problem(std::uint32_t ranks);

// Why `ranks` ranks spread over `nodes` nodes cannot be started from here with launcher `l`
// (local and mpirun start ranks on this host only; srun within its Slurm allocation), or nullopt.
std::optional<std::string> placement_problem(Launcher l, std::uint32_t ranks, std::uint32_t nodes);

// The argv that starts `program_argv` as `ranks` ranks with launcher `l`.
std::vector<std::string> launch_command(Launcher l, std::uint32_t ranks, const std::vector<std::string>& program_argv);

// The path of the running `tune` binary (/proc/self/exe), so children run the same build.
std::string self_executable();

}  // namespace tune
