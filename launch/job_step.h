// One trial's share of the allocation while others run beside it, and the
// command that confines it there: inside Slurm an `srun --exact` job step with
// its node, task, CPU and GPU counts (Slurm places it); locally a disjoint GPU
// set through CUDA_VISIBLE_DEVICES and a disjoint core set through the CPU
// affinity and OpenMP places.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "launch/launch.h"

namespace tune {

struct StepResources {
    std::uint32_t nodes = 1;
    std::uint32_t ranks = 1;          // tasks over all nodes
    std::uint32_t gpus_per_node = 0;  // 0: a CPU trial
    std::uint32_t cpus_per_rank = 1;
    std::vector<std::string> gpus;    // local: the devices it may see; empty: leave CUDA_VISIBLE_DEVICES alone
    std::vector<int> cpus;            // local: the cores it may run on; empty: no confinement
    std::string name = "tune-trial";  // Slurm: the step's name, as sacct and squeue show it
};

struct StepCommand {
    std::vector<std::string> argv;
    std::vector<std::pair<std::string, std::string>> env;
    std::vector<int> cpu_affinity;  // empty: inherit
};

// `program_argv` is one rank's command (`tune trial ...`).
StepCommand job_step(Launcher launcher, const StepResources& r, const std::vector<std::string>& program_argv);

// Under Slurm every trial is a job step, one rank included, so sacct shows each; elsewhere the
// launcher choose_launcher() picks.
Launcher step_launcher(std::string_view setting, std::uint32_t ranks, bool in_slurm);

}  // namespace tune
