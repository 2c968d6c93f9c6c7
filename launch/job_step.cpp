#include "launch/job_step.h"

#include <fmt/format.h>

namespace tune {
namespace {

std::string join(const std::vector<std::string>& items, std::string_view separator) {
    std::string out;
    for (const auto& item : items) out += (out.empty() ? "" : std::string(separator)) + item;
    return out;
}

std::vector<std::string> srun_step(const StepResources& r, const std::vector<std::string>& program_argv) {
    // --exact: the step gets only what it asks for, so other steps start beside it.
    std::vector<std::string> argv{"srun",
                                  "--exact",
                                  fmt::format("--nodes={}", r.nodes),
                                  fmt::format("--ntasks={}", r.ranks),
                                  fmt::format("--cpus-per-task={}", r.cpus_per_rank),
                                  "--kill-on-bad-exit=1",
                                  "--job-name=" + r.name};
    if (r.gpus_per_node > 0) argv.push_back(fmt::format("--gpus-per-node={}", r.gpus_per_node));
    argv.insert(argv.end(), program_argv.begin(), program_argv.end());
    return argv;
}

}  // namespace

Launcher step_launcher(std::string_view setting, std::uint32_t ranks, bool in_slurm) {
    if (in_slurm && (setting == "auto" || setting == "srun")) return Launcher::srun;
    return choose_launcher(setting, ranks);
}

StepCommand job_step(Launcher launcher, const StepResources& r, const std::vector<std::string>& program_argv) {
    StepCommand step;
    if (launcher == Launcher::srun) {
        step.argv = srun_step(r, program_argv);
        return step;
    }
    step.argv = launch_command(launcher, r.ranks, program_argv);
    if (!r.gpus.empty()) step.env.emplace_back("CUDA_VISIBLE_DEVICES", join(r.gpus, ","));
    if (r.cpus.empty()) return step;
    step.cpu_affinity = r.cpus;
    if (launcher == Launcher::mpirun) {
        // Ranks inherit the trial's cores instead of OpenMPI binding them to cores 0..N-1,
        // which another trial holds.
        step.argv.insert(step.argv.begin() + 1, {"--bind-to", "none"});
    } else {
        // One rank: its OpenMP threads one per core of its set.
        std::vector<std::string> places;
        for (int c : r.cpus) places.push_back(fmt::format("{{{}}}", c));
        step.env.emplace_back("OMP_PLACES", join(places, ","));
        step.env.emplace_back("OMP_PROC_BIND", "close");
    }
    return step;
}

}  // namespace tune
