// The losses of a parallel configuration on this process's ranks, and of the same configuration on one
// rank, for the tests that hold a parallelism to one rank's losses (tensor, pipeline).
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/config.h"
#include "core/parallel_plan.h"
#include "kernels/cpu/cpu_backend.h"
#include "train/trainer.h"

namespace tune::test {

// Each step's loss over the whole global batch: the ranks' mean (the ranks of a replica share theirs).
inline std::vector<double> losses(train::Comm& comm, const TrialConfig& c) {
    kernels::CpuBackend backend{kernels::CpuBackendOptions{1, 0}};
    const auto tokens = train::synthetic_tokens(c.seed, c.model.vocab);
    train::Trainer trainer(backend, comm, c, *tokens);
    std::vector<double> out;
    for (std::uint32_t s = 0; s < c.steps; ++s) {
        float loss = static_cast<float>(trainer.step().loss);
        comm.all_reduce(&loss, 1, kernels::DType::f32, train::ReduceOp::average);
        out.push_back(loss);
    }
    return out;
}

// The same configuration on one rank holding every layer, with every replica's rows in its micro-batch.
inline std::vector<double> single_rank_losses(TrialConfig c) {
    c.micro_batch *= parallel_plan(c).dp;
    c.world_size = 1, c.tensor_parallel = 1, c.sequence_parallel = false, c.pipeline_parallel = 1;
    c.pipeline_schedule = PipelineSchedule::one_f_one_b, c.virtual_stages = 1, c.pipeline_split = PipelineSplit::even;
    train::SingleRankComm one;
    return losses(one, c);
}

inline double worst(const std::vector<double>& a, const std::vector<double>& b) {
    double most = 0;
    for (std::size_t i = 0; i < a.size(); ++i) most = std::max(most, std::abs(a[i] - b[i]));
    return most;
}

}  // namespace tune::test
