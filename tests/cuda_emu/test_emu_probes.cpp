// `tune probe`'s device work on the emulated device: the optimizer probe
// captures each optimizer's update as the trainer does (a CUDA graph that
// reads its step on the device, for the optimizers whose update replays) in
// every precision, and the bucket probe adds a slice into a device or a
// pinned host shard. On the CPU backend these paths never capture anything.
#include <catch2/catch.hpp>

#include "core/presets.h"
#include "estimate/probed_rates.h"
#include "kernels/cuda/cuda_backend.h"
#include "probe/bucket_probe.h"
#include "probe/optimizer_probe.h"

using namespace tune;

namespace {

probe::ProbeSettings quick() {
    probe::ProbeSettings s;
    s.min_seconds = 0.001;
    return s;
}

}  // namespace

TEST_CASE("the optimizer probe records and replays every optimizer's update on the emulated device",
          "[cuda-emu][probe]") {
    const auto backend = kernels::make_cuda_backend(0);
    TrialConfig c;
    c.model = *find_model("tiny");
    for (Optimizer opt : kOptimizers)
        for (Precision p : kPrecisions) {
            INFO(to_string(opt) << " " << to_string(p));
            c.optimizer = opt;
            c.precision = p;
            const OptimizerRate r{opt, p, 256, optimizer_probe_tensors(c.model, c), 0, false};
            double spent = 0;
            const double seconds = probe::probe_optimizer(*backend, r, quick(), &spent);
            CHECK(seconds > 0);
            CHECK(spent >= seconds);
        }
    CHECK(backend->live_bytes() == 0);
}

TEST_CASE("the bucket probe adds a slice into a device shard and into a pinned host shard on the emulated device",
          "[cuda-emu][probe]") {
    const auto backend = kernels::make_cuda_backend(0);
    for (bool host : {false, true})
        for (ProbeDtype dtype : {ProbeDtype::bf16, ProbeDtype::f32}) {
            INFO((host ? "host" : "device") << " " << probe_dtype_name(dtype));
            const BucketRate rate{dtype, 2, std::uint64_t{1} << 16, 0, host};
            double spent = 0;
            CHECK(probe::probe_bucket(*backend, rate, quick(), &spent) > 0);
        }
    CHECK(backend->live_bytes() == 0);
}
