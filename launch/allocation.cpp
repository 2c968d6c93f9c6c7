#include "launch/allocation.h"

#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <sstream>
#include <thread>

#include "core/environment.h"

namespace tune {
namespace {

// Slurm's per-node counts (SLURM_JOB_NUM_NODES, SLURM_GPUS_ON_NODE, SLURM_CPUS_ON_NODE) are plain numbers.
std::optional<long> env_count(const char* name) { return environment_integer(name, 1, std::int64_t{1} << 20); }

std::vector<int> affinity_cores() {
    cpu_set_t set;
    CPU_ZERO(&set);
    std::vector<int> cores;
    if (::sched_getaffinity(0, sizeof(set), &set) == 0)
        for (int c = 0; c < CPU_SETSIZE; ++c)
            if (CPU_ISSET(c, &set)) cores.push_back(c);
    if (cores.empty())
        for (unsigned c = 0; c < std::max(1u, std::thread::hardware_concurrency()); ++c)
            cores.push_back(static_cast<int>(c));
    return cores;
}

}  // namespace

std::vector<std::string> split_device_list(const std::string& list) {
    std::vector<std::string> out;
    std::istringstream in(list);
    for (std::string item; std::getline(in, item, ',');)
        if (!item.empty()) out.push_back(item);
    return out;
}

Allocation detect_allocation(std::size_t detected_gpus) {
    Allocation a;
    a.in_slurm = std::getenv("SLURM_JOB_ID") != nullptr;
    if (a.in_slurm) a.nodes = static_cast<std::uint32_t>(env_count("SLURM_JOB_NUM_NODES").value_or(1));
    if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES")) {
        a.gpus = split_device_list(visible);
    } else {
        std::size_t n = detected_gpus;
        if (a.in_slurm) n = static_cast<std::size_t>(env_count("SLURM_GPUS_ON_NODE").value_or(static_cast<long>(n)));
        for (std::size_t i = 0; i < n; ++i) a.gpus.push_back(std::to_string(i));
    }
    a.cpus = affinity_cores();
    // Inside a job the batch step's affinity is this node's share; SLURM_CPUS_ON_NODE says the same
    // when the step was not bound.
    if (a.in_slurm)
        if (auto on_node = env_count("SLURM_CPUS_ON_NODE");
            on_node && static_cast<std::size_t>(*on_node) < a.cpus.size())
            a.cpus.resize(static_cast<std::size_t>(*on_node));
    return a;
}

}  // namespace tune
