// What this process may hand out to trials running side by side: nodes (a Slurm
// allocation's, else this one), GPUs per node, and CPU cores. Read from the
// environment Slurm and CUDA set (SLURM_JOB_NUM_NODES, SLURM_GPUS_ON_NODE,
// SLURM_CPUS_ON_NODE, CUDA_VISIBLE_DEVICES) and this process's CPU affinity.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tune {

struct Allocation {
    bool in_slurm = false;  // SLURM_JOB_ID is set: trials are job steps (srun)
    std::uint32_t nodes = 1;
    std::vector<std::string> gpus;  // this node's GPUs as CUDA_VISIBLE_DEVICES names them ("0", "3", "GPU-uuid")
    std::vector<int> cpus;          // cores this process may run on, per node
};

// `detected_gpus`: how many devices the CUDA runtime sees here (the count when
// neither Slurm nor CUDA_VISIBLE_DEVICES names them).
Allocation detect_allocation(std::size_t detected_gpus);

// "0,2,5" -> {"0", "2", "5"}; empty entries dropped.
std::vector<std::string> split_device_list(const std::string& list);

}  // namespace tune
