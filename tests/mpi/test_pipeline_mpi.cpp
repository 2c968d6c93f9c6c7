// Pipeline parallelism across real ranks (core/pipeline_schedule.h): stages of contiguous layers that pass
// activations forward and their gradients back train the model one rank trains whole, so after three steps
// in fp32 their losses are the single rank's within 1e-5 (1F1B over every rank, with LoRA,
// with tied embeddings, beside tensor parallelism 2 x 2 and data parallelism 2 x 2). Every rank's tagged
// peak equals its stage's estimate, component by component. Runs under 2 and 4 ranks.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/parallel_plan.h"
#include "core/pipeline_stages.h"
#include "core/presets.h"
#include "estimate/estimate.h"
#include "kernels/cpu/cpu_backend.h"
#include "tests/mpi/mpi_session.h"
#include "tests/mpi/parallel_losses.h"
#include "train/comm/comm_mpi.h"
#include "train/trainer.h"

namespace {

using namespace tune;
using test::losses, test::single_rank_losses, test::worst;

// `small`: 4 layers, 8 heads, vocabulary 2048; pp 2 and 4 split its layers evenly.
TrialConfig pp_config(std::uint32_t pp, std::uint32_t world, std::uint32_t grad_accum = 4) {
    TrialConfig c;
    c.model = *find_model("small");
    c.optimizer = Optimizer::adamw, c.precision = Precision::fp32, c.zero_stage = 0;
    c.world_size = world, c.pipeline_parallel = pp;
    c.grad_accum = grad_accum;
    c.micro_batch = 1, c.context = 16, c.steps = 3, c.warmup = 0;
    c.clip = 1.0;  // the global norm over the stages runs
    c.eps = 1e-4;  // Adam's first steps smooth in g: fp32 reordering cannot flip a tiny gradient's update
    return c;
}

void check_equal_losses(train::Comm& comm, const TrialConfig& c) {
    const std::vector<double> split = losses(comm, c), whole = single_rank_losses(c);
    INFO(summary(c) << " on " << comm.world_size() << " ranks: step losses " << split[0] << ", " << split[1] << ", "
                    << split[2] << " against " << whole[0] << ", " << whole[1] << ", " << whole[2]
                    << "; largest difference " << worst(split, whole));
    CHECK(worst(split, whole) < 1e-5);
}

}  // namespace

TEST_CASE("pipeline stages give one rank's losses after three steps: 1F1B over every rank", "[mpi][pipeline]") {
    train::MpiComm comm(test::mpi_runtime());
    const auto n = static_cast<std::uint32_t>(comm.world_size());
    check_equal_losses(comm, pp_config(n, n));
    check_equal_losses(comm, pp_config(n, n, 8));
    check_equal_losses(comm, pp_config(n, n, n));  // as many micro-batches as stages
    // Interleaving is estimated, not run: its chunks can leave two neighbours both sending.
    TrialConfig c = pp_config(2, n);
    c.pipeline_schedule = PipelineSchedule::interleaved, c.virtual_stages = 2;
    CHECK_THAT(*train::pipeline_unsupported(c), Catch::Contains("1f1b"));
}

TEST_CASE("pipeline stages with LoRA, tied embeddings, the embedding split and bf16 give one rank's losses",
          "[mpi][pipeline]") {
    train::MpiComm comm(test::mpi_runtime());
    const auto n = static_cast<std::uint32_t>(comm.world_size());
    TrialConfig lora = pp_config(n, n);
    lora.method = Method::lora, lora.lora_rank = 4;
    check_equal_losses(comm, lora);
    // The last stage's copy of a tied embedding: the two copies' gradients summed, the norm counting one.
    TrialConfig tied = pp_config(n, n);
    tied.model.tied_embeddings = true;
    check_equal_losses(comm, tied);
    if (n == 2) {
        TrialConfig split = pp_config(2, 2);
        split.model.layers = 3, split.pipeline_split = PipelineSplit::embedding;  // stages of 1 and 2 layers
        check_equal_losses(comm, split);
    }
}

TEST_CASE("pipeline x tensor and pipeline x data parallel 2 x 2 give one rank's losses", "[mpi][pipeline]") {
    train::MpiComm comm(test::mpi_runtime());
    if (comm.world_size() != 4) return;  // the grid needs four ranks (ctest mpi_ranks_4)
    TrialConfig tp = pp_config(2, 4);
    tp.tensor_parallel = 2;
    check_equal_losses(comm, tp);
    tp.sequence_parallel = true;
    check_equal_losses(comm, tp);
    for (std::uint32_t stage : {0u, 1u}) {
        TrialConfig dp = pp_config(2, 4);
        dp.zero_stage = stage;
        check_equal_losses(comm, dp);
    }
}

TEST_CASE("every pipeline rank's tagged peak equals its stage's estimate, component by component",
          "[mpi][pipeline][memory]") {
    train::MpiComm comm(test::mpi_runtime());
    const auto n = static_cast<std::uint32_t>(comm.world_size());
    for (const auto& [ck, method, ga] : {std::tuple{Checkpointing::none, Method::full, 4u},
                                         {Checkpointing::full, Method::full, 8u},
                                         {Checkpointing::selective, Method::full, 4u},
                                         {Checkpointing::none, Method::lora, 4u},
                                         {Checkpointing::full, Method::lora, 6u}}) {
        TrialConfig c = pp_config(n, n, ga);
        c.precision = Precision::bf16_mixed, c.checkpointing = ck, c.method = method, c.lora_rank = 4;
        c.steps = 2;
        kernels::CpuBackend backend{kernels::CpuBackendOptions{1, 0}};
        const auto tokens = train::synthetic_tokens(c.seed, c.model.vocab);
        train::Trainer trainer(backend, comm, c, *tokens);
        for (std::uint32_t s = 0; s < c.steps; ++s) trainer.step();
        EstimateOptions eo;
        eo.cpu_threads = 1;
        const Estimate e = estimate(c, *find_device("cpu"), eo);
        const auto stage = parallel_plan(c).coordinates(static_cast<std::uint32_t>(comm.rank()))[MeshAxis::pp];
        REQUIRE(e.stages.size() == n);
        const MemoryBreakdown& predicted = e.stages[stage].memory;
        const MemoryBreakdown& measured = trainer.memory().peak_breakdown();
        INFO(summary(c) << ": rank " << comm.rank() << " (stage " << stage << "), measured peak " << measured.peak
                        << " at " << measured.peak_phase << ", estimated " << predicted.peak << " at "
                        << predicted.peak_phase);
        for (Component k : kComponents) {
            if (k == Component::overhead) continue;  // the process's, outside the tagged ledger
            INFO(to_string(k) << ": measured " << measured[k] << ", estimated " << predicted[k]);
            CHECK(measured[k] == predicted[k]);
        }
    }
}
