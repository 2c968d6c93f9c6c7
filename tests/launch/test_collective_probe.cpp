// A 2-rank collective probe run: `tune probe-collectives` started under
// mpirun, as `tune probe` and `tune sweep --probe` start it.
#include <catch2/catch.hpp>

#include "driver/collective_probes.h"
#include "sweep/spec.h"

using namespace tune;

TEST_CASE("collective probes run on 2 MPI ranks and report a bus bandwidth each", "[mpi][probe][collectives]") {
    SweepSpec spec;
    spec.hardware.backend = BackendKind::cpu;
    spec.trial.launcher = "mpirun";
    // As the trainer calls them: fp32, and 16-bit gradients' reductions.
    const std::vector<CollectiveRate> plan{{Collective::all_reduce, 2, 256 * 1024, 0},
                                           {Collective::reduce_scatter, 2, 256 * 1024, 0},
                                           {Collective::all_gather, 2, 256 * 1024, 0},
                                           {Collective::reduce_scatter, 2, 128 * 1024, 0, ProbeDtype::bf16},
                                           {Collective::all_reduce, 2, 128 * 1024, 0, ProbeDtype::f16}};
    const auto results = collective_prober(spec, {TUNE_BINARY, "probe-collectives"}, 0.005, 1)(plan);
    REQUIRE(results.size() == plan.size());
    for (std::size_t i = 0; i < plan.size(); ++i) {
        CHECK(results[i].rate.op == plan[i].op);
        CHECK(results[i].rate.dtype == plan[i].dtype);
        CHECK(results[i].rate.ranks == 2);
        CHECK(results[i].rate.bytes == plan[i].bytes);
        CHECK(results[i].rate.bus_bytes_per_s > 0);
        CHECK(results[i].seconds > 0);
    }
}
