// The training cases of `tune selftest` (three steps per optimizer and
// precision through the trainer), run CPU against CPU: they must agree, and
// the losses must be real losses of a tiny Llama (about ln 256 at the start).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <set>
#include <string>

#include "core/config.h"
#include "kernels/cpu/cpu_backend.h"
#include "train/comm/comm.h"
#include "train/selftest_training.h"

using namespace tune::kernels;

TEST_CASE("every optimizer and precision has a training case") {
    const auto cases = tune::train::training_cases();
    // 5 optimizers x 4 precisions, one with checkpointing/accumulation each, and four of tiny-variants.
    CHECK(cases.size() == 29);
    int scheduled = 0, variants = 0;
    std::set<std::string> modes;
    for (const auto& c : cases) {
        CHECK(c.op.rfind("train_3_steps/", 0) == 0);
        if (const auto at = c.shape.find("ckpt="); at != std::string::npos) {
            ++scheduled;
            modes.insert(c.shape.substr(at + 5, c.shape.find(' ', at) - at - 5));
        }
        if (c.shape.find("tiny-variants") != std::string::npos) ++variants;
    }
    CHECK(scheduled == 7);
    CHECK(variants == 4);
    // Every mode that recomputes runs on the device against the CPU.
    for (tune::Checkpointing mode : tune::kCheckpointings) {
        if (mode != tune::Checkpointing::none) CHECK(modes.count(std::string(tune::to_string(mode))) == 1);
    }
}

TEST_CASE("training cases agree CPU against CPU and produce plausible losses") {
    CpuBackend reference, candidate;
    for (const auto& c : tune::train::training_cases()) {
        INFO(c.op << " " << c.dtype);
        const auto r = selftest::run_case(c, reference, candidate, 3);
        INFO(r.message);
        REQUIRE(r.status == selftest::Status::pass);
        REQUIRE(r.outputs.size() == 1);
        CHECK(r.outputs[0].stats.max_abs == 0.0);
    }
    // The losses themselves, read from one run.
    const auto c = tune::train::training_cases().front();
    const auto data = c.make(3);
    auto tensors = data.tensors;
    {
        selftest::DeviceTensors d(reference, tensors);
        data.run(reference, d);
        reference.copy_to_host(tensors[0].bytes.data(), d[0], tensors[0].bytes.size());
    }
    float losses[3];
    std::memcpy(losses, tensors[0].bytes.data(), sizeof losses);
    for (float l : losses) CHECK(std::abs(l - std::log(256.0f)) < 1.5f);
}

TEST_CASE("the ZeRO stages on one CPU rank agree with the CPU reference (the --gpus comparison itself)") {
    CpuBackend backend;
    tune::train::SingleRankComm comm;
    tune::train::ZeroSelftestOptions o;
    o.context = 16;
    const auto rows = tune::train::zero_stages_against_cpu(backend, comm, o);
    REQUIRE(rows.size() == 4);
    for (std::uint32_t stage = 0; stage < 4; ++stage) {
        const auto& r = rows[stage];
        INFO("stage " << stage << ": params " << r.param_diff << ", losses " << r.loss_diff << ", moved " << r.moved
                      << " " << r.error);
        CHECK(r.stage == stage);
        CHECK(r.ranks == 1);
        CHECK(r.error.empty());
        CHECK(r.pass);
        CHECK(r.param_diff <= 1e-6);  // the same backend, the same batch: only the stage's code path differs
        CHECK(r.loss_diff <= 1e-6);
        CHECK(r.moved > 10 * r.param_tolerance);
    }
    CHECK(backend.live_bytes() == 0);
}
