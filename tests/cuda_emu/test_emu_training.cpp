// Training on the emulated device: `tune selftest`'s three-step cases per
// optimizer and precision against the CPU, and a short `tune trial` per
// optimizer and precision through run_trial on the CUDA backend (the path a
// sweep's trial takes: memory statistics, estimate, timing).
#include "emu_cases.h"
#include "offload_checks.h"
#include "short_trial.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <cuda_runtime.h>
#include <fmt/format.h>

#include "core/presets.h"
#include "core/validity.h"
#include "core/zero_plan.h"
#include "estimate/estimate.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/math/half.h"
#include "tests/support/trainer_fixture.h"
#include "train/comm/comm.h"
#include "train/comm/comm_nccl.h"
#include "train/micro_batch_graphs.h"
#include "train/model_state.h"
#include "train/selftest_training.h"
#include "train/trainer.h"
#include "train/trial.h"

using namespace tune;

namespace {

void training_cases_for(const char* optimizer) {
    tune_emu_test::run_cases(train::training_cases(), {std::string("train_3_steps/") + optimizer});
}

// Two steps of the tiny model, the second timed; checkpointing and
// accumulation vary with the optimizer so every mode runs somewhere.
TrialConfig short_trial(Optimizer o, Precision p) {
    TrialConfig c = tune_emu_test::tiny_short_trial(o, p);
    c.checkpointing = static_cast<Checkpointing>(static_cast<int>(o) % 3);
    return c;
}

}  // namespace

TEST_CASE("emulated device: AdamW training cases") { training_cases_for("adamw"); }
TEST_CASE("emulated device: Lion training cases") { training_cases_for("lion"); }
TEST_CASE("emulated device: 8-bit Adam training cases") { training_cases_for("adam8bit"); }
TEST_CASE("emulated device: Adafactor training cases") { training_cases_for("adafactor"); }
TEST_CASE("emulated device: LOMO training cases") { training_cases_for("lomo"); }

// Through a one-rank NCCL communicator at ZeRO stages 0-3 (so sharded
// states, buckets and gathers go through NCCL in every dtype), and the
// estimator's workspace term against the trainer's workspace on CUDA.
TEST_CASE("emulated device: a short trial per optimizer and precision runs ok on the CUDA backend over NCCL") {
    train::TrialOptions options;
    options.backend = BackendKind::cuda;
    options.log = nullptr;
    int index = 0;
    for (Optimizer o : {Optimizer::adamw, Optimizer::lion, Optimizer::adam8bit, Optimizer::adafactor, Optimizer::lomo})
        for (Precision p : {Precision::fp32, Precision::bf16_mixed, Precision::fp16_mixed, Precision::bf16}) {
            TrialConfig c = short_trial(o, p);
            c.zero_stage = static_cast<std::uint32_t>(index++ % 4);
            const auto nccl = train::make_nccl_comm(train::new_nccl_id(), 0, 1, train::NcclPlacement{0, nullptr});
            const TrialResult r = train::run_trial(c, options, *nccl);
            INFO(to_string(o) << " " << to_string(p) << " zero " << c.zero_stage << ": " << r.reason);
            REQUIRE(r.status == TrialStatus::ok);
            CHECK(r.losses.size() == c.steps);
            // A GPU trial's result names the attention it ran (here tune's kernels: no cuDNN is set).
            CHECK_THAT(r.attention, Catch::StartsWith("tune's kernels") || Catch::StartsWith("cuDNN"));
            const Estimate e = estimate(c, *find_device("h100-80gb"), EstimateOptions{});
            INFO("workspace: measured " << r.memory[Component::workspace] << ", estimated "
                                        << e.memory[Component::workspace]);
            CHECK(r.memory[Component::workspace] == e.memory[Component::workspace]);
        }
}

// train/grad_targets.h: the gradients are written where a GEMM first produces them (stages 0-1), or
// a bucket's first slice is copied into the shard (2-3); only an op that adds (the embedding's rows, the
// norms' dw) zeroes its tensor first. Zeroing every buffer ahead was 2 bytes a parameter each step.
TEST_CASE("emulated device: a step's backward zeroes no gradient buffer ahead") {
    for (const std::uint32_t stage : {0u, 1u, 2u, 3u}) {
        TrialConfig c = tune_emu_test::tiny_short_trial(Optimizer::adamw, Precision::bf16_mixed);
        c.zero_stage = stage;
        const auto backend = kernels::make_cuda_backend(0);
        train::SingleRankComm comm;
        const test::FixedTokens tokens(c.model.vocab);
        train::Trainer trainer(*backend, comm, c, tokens);
        trainer.step();
        const std::uint64_t before = tune_emu::memset_bytes();
        trainer.compute_gradients();
        backend->synchronize();
        const std::uint64_t zeroed = tune_emu::memset_bytes() - before;
        const ModelSpec& m = c.model;
        const std::uint64_t params = m.vocab * m.hidden * 2 + m.hidden +
                                     m.layers * (2 * m.hidden + m.hidden * (m.q_dim() + 2 * m.kv_dim()) +
                                                 m.q_dim() * m.hidden + 3 * m.hidden * m.ffn);
        const std::uint64_t embedding = 2 * m.vocab * m.hidden;  // bf16 rows the embedding backward adds into
        // At stages 2-3 the outer buffer's bucket is reduce-scattered after the head's phase and again after
        // the embedding's, each time with the tensors the other phase writes zeroed: three tensors of
        // (V, h) per micro-batch. The layers' buckets zero only their padding.
        const std::uint64_t outer = stage >= 2 ? 3 * c.grad_accum * embedding : embedding;
        INFO("stage " << stage << ": zeroed " << zeroed << " bytes over " << c.grad_accum
                      << " micro-batches, gradients " << 2 * params << " bytes, the embedding's " << embedding);
        CHECK(zeroed < outer + 2 * params / 10);
    }
}

// train/trainer.cpp gradient_sums: without sharding, loss scaling or offload, the gradients' squared
// sums and their multiplier are one graph, recorded at the first step and launched at every step; where a
// collective (ZeRO-1's shards) or the host must see the norm, the ops run one by one. update_on_device:
// AdamW's, Lion's and 8-bit Adam's update is a second graph at every stage, the step count read on the
// device (the self-test's "graph replay" cases check the count each reads); Adafactor's is not.
// (The micro-batches' own graphs are counted apart, by the trainer, and tested below.)
TEST_CASE("emulated device: the gradient norm's and the update's launches replay as CUDA graphs") {
    const auto launches = [](Optimizer o, std::uint32_t stage, Precision p) {
        TrialConfig c = tune_emu_test::tiny_short_trial(o, p);
        c.zero_stage = stage;
        c.clip = 1.0;
        const auto backend = kernels::make_cuda_backend(0);
        train::SingleRankComm comm;
        const test::FixedTokens tokens(c.model.vocab);
        train::Trainer trainer(*backend, comm, c, tokens);
        const std::uint64_t before = tune_emu::graph_launches();
        for (int i = 0; i < 3; ++i) CHECK(std::isfinite(trainer.step().grad_norm));
        return tune_emu::graph_launches() - before - trainer.micro_batch_graph_launches();
    };
    CHECK(launches(Optimizer::adamw, 0, Precision::bf16_mixed) == 6);
    CHECK(launches(Optimizer::lion, 0, Precision::bf16) == 6);
    CHECK(launches(Optimizer::adamw, 1, Precision::bf16_mixed) == 3);     // the shard's sum: an all-reduce completes it
    CHECK(launches(Optimizer::adam8bit, 0, Precision::bf16_mixed) == 6);  // a call per tensor, one graph
    CHECK(launches(Optimizer::adafactor, 0, Precision::bf16_mixed) == 3);  // step sizes from the host: the sums
    CHECK(launches(Optimizer::adamw, 0, Precision::fp16_mixed) == 0);      // loss scaling: the host decides first
}

namespace {

struct Trained {
    std::vector<double> losses;
    train::HostParams weights;  // the trained state: every weight, or the adapters
    std::uint64_t graph_launches = 0;
    std::optional<std::string> stopped;
};

Trained run_training(const TrialConfig& c, bool graphs) {
    const auto backend = kernels::make_cuda_backend(0);
    train::SingleRankComm comm;
    const test::FixedTokens tokens(c.model.vocab);
    train::Trainer trainer(*backend, comm, c, tokens);
    if (!graphs) trainer.stop_micro_batch_graphs("the test's eager run");
    Trained t;
    for (std::uint32_t s = 0; s < c.steps; ++s) {
        t.losses.push_back(trainer.step().loss);
        INFO("step " << s + 1);
        if (c.optimizer != Optimizer::lomo) CHECK(trainer.memory().phase() == "optimizer-step");
    }
    t.weights = trainer.model().download_weights();
    t.graph_launches = trainer.micro_batch_graph_launches();
    t.stopped = trainer.micro_batch_graphs_stopped();
    return t;
}

}  // namespace

// train/micro_batch_graphs.h: each kind of micro-batch (a step's first, its later ones) runs eagerly once,
// is recorded the second time and replayed after, its buffers at fixed places in an arena. Four steps of
// two micro-batches: 2 recorded and 4 replayed launches, whose gradients decide the weights. The kernels
// are deterministic, so the losses and weights must be the eager run's to the bit. The last run takes every
// variant of the layer (biases, q/k norms, tied embeddings), eager attention, 8-bit Adam and three
// micro-batches a step, whose later two are one kind: the third is recorded in step 1.
TEST_CASE("emulated device: a micro-batch's forward and backward replay as CUDA graphs, bit for bit as eager") {
    struct Run {
        Method method;
        Precision precision;
        Checkpointing checkpointing;
        std::uint32_t stage = 0;
        std::uint32_t grad_accum = 2;
        Optimizer optimizer = Optimizer::adamw;
        Attention attention = Attention::flash;
        bool features = false;  // biases, q/k norms, tied embeddings, a head_dim apart, llama3 RoPE scaling
    };
    for (const Run& run : {Run{Method::full, Precision::fp32, Checkpointing::none},
                           Run{Method::full, Precision::bf16_mixed, Checkpointing::full, 1},
                           Run{Method::lora, Precision::bf16_mixed, Checkpointing::selective_op},
                           Run{Method::qlora, Precision::bf16, Checkpointing::full},
                           Run{Method::full, Precision::bf16_mixed, Checkpointing::selective_op, 0, 3,
                               Optimizer::adam8bit, Attention::eager, true}}) {
        TrialConfig c = tune_emu_test::tiny_short_trial(run.optimizer, run.precision);
        if (run.features) c.model = test::feature_model();
        c.method = run.method;
        c.checkpointing = run.checkpointing;
        c.zero_stage = run.stage;
        c.grad_accum = run.grad_accum;
        c.attention = run.attention;
        c.steps = 4;
        INFO(c.model.name << " " << to_string(run.method) << " " << to_string(run.precision) << " "
                          << to_string(run.checkpointing) << " zero " << run.stage << " accum " << run.grad_accum);
        const Trained eager = run_training(c, false);
        const Trained replayed = run_training(c, true);
        CHECK(eager.graph_launches == 0);
        CHECK(replayed.stopped == std::nullopt);
        // Every micro-batch but the first of each kind (the step's first, and its later ones) is launched.
        CHECK(replayed.graph_launches == c.steps * c.grad_accum - 2);
        CHECK(replayed.losses == eager.losses);
        CHECK(replayed.weights == eager.weights);
    }
}

// The one rule (micro_batch_graphs_off): what runs collectives or changing arguments inside a micro-batch
// stays eager, and the trainer says why.
TEST_CASE("emulated device: micro-batches that gather, reduce-scatter or change arguments are not recorded") {
    const auto off = [](TrialConfig c) {
        c.steps = 3;
        const Trained t = run_training(c, true);
        CHECK(t.graph_launches == 0);
        return t.stopped.value_or("");
    };
    TrialConfig c = tune_emu_test::tiny_short_trial(Optimizer::adamw, Precision::bf16_mixed);
    TrialConfig zero2 = c, fp16 = c, neftune = c, lomo = c, offload = c;
    zero2.zero_stage = 2;
    offload.zero_stage = 2;
    fp16.precision = Precision::fp16_mixed;
    neftune.neftune_alpha = 5;
    lomo = tune_emu_test::tiny_short_trial(Optimizer::lomo, Precision::bf16_mixed);
    offload.offload = Offload::optimizer;
    CHECK_THAT(off(zero2), Catch::Contains("ZeRO-2"));
    CHECK_THAT(off(fp16), Catch::Contains("loss scale"));
    CHECK_THAT(off(neftune), Catch::Contains("NEFTune"));
    CHECK_THAT(off(lomo), Catch::Contains("LOMO"));
    CHECK_THAT(off(offload), Catch::Contains("ZeRO-2"));  // offload runs at stages 2-3 only
}

TEST_CASE("emulated device: the ledger counts a replayed micro-batch as it counted the recorded one") {
    TrialConfig c = tune_emu_test::tiny_short_trial(Optimizer::adamw, Precision::bf16_mixed);
    c.grad_accum = 1;
    const auto backend = kernels::make_cuda_backend(0);
    train::SingleRankComm comm;
    const test::FixedTokens tokens(c.model.vocab);
    train::Trainer trainer(*backend, comm, c, tokens);
    train::Allocator& memory = trainer.memory();
    // Events as the ledger counts them: which buffer is which is the backend's business.
    const auto counted = [](train::LedgerTrace t) {
        for (train::LedgerEvent& e : t) e.ptr = nullptr;
        return t;
    };
    train::LedgerTrace eager;
    std::uint64_t peak = 0;
    for (std::uint64_t run = 0; run < 4; ++run) {  // eager, recorded, replayed twice
        memory.start_trace();
        trainer.compute_gradients();
        const train::LedgerTrace seen = counted(memory.end_trace());
        INFO("run " << run + 1);
        CHECK(trainer.micro_batch_graph_launches() == (run == 0 ? 0 : run));
        CHECK(memory.phase() == "embed-backward");
        if (run == 0) {
            eager = seen;
            peak = memory.peak();
            CHECK(eager.size() > 50);
        }
        CHECK(seen == eager);
        CHECK(memory.peak() == peak);
    }
}

// Where the backend refuses the capture (here an op that waits for the device), the micro-batch runs eagerly
// and every later one too: nothing is lost, the gradient marks are as the recording found them, and the
// reason is kept for the trial's result.
TEST_CASE("emulated device: a micro-batch whose capture fails runs eagerly, and later ones too") {
    const ModelSpec m = *find_model("tiny");
    const auto backend = kernels::make_cuda_backend(0);
    train::SingleRankComm comm;
    train::Allocator memory(*backend, 0);
    const train::ParamLayout layout = train::make_param_layout(m, 1, 256);
    train::ModelState state(*backend, memory, layout, train::precision_plan(Precision::fp32), true, zero_plan(0), comm,
                            {});
    train::MicroBatchGraphs graphs(*backend, memory, state);
    train::Buffer out = memory.allocate(Component::activations, 4);
    const std::uint64_t live = memory.live();
    int calls = 0;
    float value = 0;
    const auto ops = [&] {
        ++calls;
        train::Buffer scratch = memory.allocate(Component::activations, 1024);
        backend->fill_zero(scratch.get(), 1024);
        backend->copy(out.get(), scratch.get(), 4);
        backend->synchronize();  // waits: a capture cannot hold it
    };
    for (int run = 0; run < 4; ++run) {
        state.forget_grads();
        const float one = 1.0f;
        backend->copy_to_device(out.get(), &one, 4);
        graphs.run(ops);
        backend->copy_to_host(&value, out.get(), 4);
        CHECK(value == 0.0f);  // the ops ran
    }
    CHECK(calls == 5);  // eager, the refused capture and its eager run, eager twice
    CHECK(graphs.launches() == 0);
    REQUIRE(graphs.stopped());
    CHECK_THAT(*graphs.stopped(), Catch::Contains("cudaStreamSynchronize"));
    CHECK(memory.live() == live);

    // A micro-batch that allocates nothing has nothing to place: recording stops before it opens its
    // trace, and a trace the caller opened stays open.
    train::MicroBatchGraphs none(*backend, memory, state);
    memory.start_trace();
    for (int run = 0; run < 3; ++run) {
        state.forget_grads();
        none.run([&] { backend->fill_zero(out.get(), 4); });
    }
    memory.set_phase("after");
    const train::LedgerTrace outer = memory.end_trace();
    REQUIRE(none.stopped());
    CHECK_THAT(*none.stopped(), Catch::Contains("nothing to place"));
    REQUIRE(outer.size() == 1);
    CHECK(outer[0].phase == "after");
}

TEST_CASE("emulated device: lora and qlora trials run on the CUDA backend at stages 0 and 3, memory as estimated") {
    train::TrialOptions options;
    options.backend = BackendKind::cuda;
    options.log = nullptr;
    for (int run = 0; run < 4; ++run) {
        const Method method = run % 2 == 0 ? Method::lora : Method::qlora;
        const std::uint32_t stage = run < 2 ? 0 : 3;
        TrialConfig c = short_trial(Optimizer::adamw, Precision::bf16_mixed);
        c.method = method;
        c.lora_rank = 8;
        c.zero_stage = stage;  // qlora at stage 3: its NF4 shard gathered through NCCL before each use
        const auto nccl = train::make_nccl_comm(train::new_nccl_id(), 0, 1, train::NcclPlacement{0, nullptr});
        const TrialResult r = train::run_trial(c, options, *nccl);
        INFO(summary(c) << ": " << r.reason);
        REQUIRE(r.status == TrialStatus::ok);
        CHECK(r.losses.size() == c.steps);
        const Estimate e = estimate(c, *find_device("h100-80gb"), EstimateOptions{});
        CHECK(r.memory[Component::workspace] == e.memory[Component::workspace]);
        CHECK(r.memory[Component::params] == e.memory[Component::params]);
    }
}

// The host update (a CPU backend beside the device) writes the fp32 master; the
// device adds gradient shards into pinned host memory and casts the master to
// its weights. Each result against the same trial on the CPU backend, and
// both ledgers against the estimate, byte for byte.
TEST_CASE("emulated device: offload trials run on the CUDA backend, host and device ledgers as estimated") {
    // Every optimizer and precision the GPU engine offloads (AdamW and Lion; the
    // precisions with an fp32 master), both offloads at the stages they run,
    // full fine-tuning, LoRA and QLoRA.
    train::TrialOptions on_gpu, on_cpu;
    on_gpu.backend = BackendKind::cuda;
    on_cpu.backend = BackendKind::cpu;
    on_gpu.log = on_cpu.log = nullptr;
    int runs = 0;
    for (Optimizer o : {Optimizer::adamw, Optimizer::lion})
        for (Precision p : {Precision::bf16_mixed, Precision::fp16_mixed})
            for (auto [off, stage] : {std::pair{Offload::optimizer, 2u}, std::pair{Offload::optimizer, 3u},
                                      std::pair{Offload::optimizer_params, 3u}})
                for (Method method : {Method::full, Method::lora, Method::qlora}) {
                    TrialConfig c = short_trial(o, p);
                    c.zero_stage = stage, c.offload = off, c.method = method, c.lora_rank = 8;
                    if (invalid_reason(c)) continue;
                    const auto nccl =
                        train::make_nccl_comm(train::new_nccl_id(), 0, 1, train::NcclPlacement{0, nullptr});
                    tune_emu_test::check_offload_trial(c, train::run_trial(c, on_gpu, *nccl),
                                                       train::run_trial(c, on_cpu));
                    ++runs;
                }
    // 2 optimizers x 2 precisions x 3 placements x 3 methods.
    CHECK(runs == 36);
}

// train/trainer.cpp BucketSink: each gradient slice reaches its host shard as side work
// (kernels/backend.h Backend::beside): a copy, then adds for the later micro-batches. The emulator
// holds a side stream's work until something waits for it, the latest a GPU may run it, so a bucket
// freed before its slice crossed fails the copy, and a host read before synchronize() sees stale
// gradients. The shards are then the CPU backend's, to the 16-bit tolerance.
TEST_CASE("emulated device: offload's gradient slices cross on the side stream, each bucket freed after its copy") {
    TrialConfig c = tune_emu_test::tiny_short_trial(Optimizer::adamw, Precision::bf16_mixed);
    c.zero_stage = 2, c.offload = Offload::optimizer, c.grad_accum = 2;
    const auto gpu = kernels::make_cuda_backend(0);
    train::SingleRankComm gpu_comm;
    const test::FixedTokens tokens(c.model.vocab);
    train::Trainer on_gpu(*gpu, gpu_comm, c, tokens);
    test::TrainerRig cpu_side(c, std::make_unique<test::FixedTokens>(c.model.vocab));
    train::Trainer& on_cpu = *cpu_side.trainer;
    const std::uint64_t before = tune_emu::held_work_ran();
    on_gpu.compute_gradients();
    on_cpu.compute_gradients();
    gpu->synchronize();  // as the optimizer step does before the host reads the shards
    // A slice per bucket: the head's, each layer's and the embedding's, per micro-batch.
    CHECK(tune_emu::held_work_ran() - before == c.grad_accum * (c.model.layers + 2));
    CHECK(on_gpu.memory().live(Component::comm) == 0);  // every bucket freed by the backward's end
    float largest = 0, worst = 0;
    for (std::size_t b = 0; b < on_gpu.model().layout().buffers(); ++b) {
        const auto* g = static_cast<const math::bf16*>(on_gpu.model().grads(b));
        const auto* r = static_cast<const math::bf16*>(on_cpu.model().grads(b));
        for (std::int64_t i = 0; i < on_gpu.model().grads_length(b); ++i) {
            largest = std::max(largest, std::abs(math::to_float(r[i])));
            worst = std::max(worst, std::abs(math::to_float(g[i]) - math::to_float(r[i])));
        }
    }
    INFO("largest gradient " << largest << ", largest difference " << worst);
    CHECK(largest > 0);
    CHECK(worst <= 2e-2f * largest);
}

TEST_CASE("emulated device: offload's host ledger is pinned host memory, none of it on the device") {
    // What the host ledger holds is exactly what cudaHostAlloc holds, beside the micro-batch's pinned token
    // window and losses (train/trainer.cpp MicroBatchIo): the device's memory keeps only the device
    // ledger (plus the backend's own scratch).
    auto backend = kernels::make_cuda_backend(0);
    const auto nccl = train::make_nccl_comm(train::new_nccl_id(), 0, 1, train::NcclPlacement{0, nullptr});
    TrialConfig c = short_trial(Optimizer::adamw, Precision::bf16_mixed);
    c.zero_stage = 3, c.offload = Offload::optimizer_params;
    const std::uint64_t pinned_before = tune_emu::pinned_host_bytes();
    const std::uint64_t tokens_t = std::uint64_t{c.micro_batch} * c.context;
    const std::uint64_t io = (tokens_t + 1) * 4 + tokens_t * 4;
    test::FixedTokens tokens(c.model.vocab);
    {
        train::Trainer trainer(*backend, *nccl, c, tokens);
        CHECK(trainer.host_memory().live() > 0);
        CHECK(tune_emu::pinned_host_bytes() - pinned_before == trainer.host_memory().live() + io);
        const train::StepStats s = trainer.step();
        CHECK(std::isfinite(s.loss));
        CHECK(tune_emu::pinned_host_bytes() - pinned_before == trainer.host_memory().live() + io);
        CHECK(trainer.memory().live(Component::params) == 0);  // every weight shard is on the host
    }
    CHECK(tune_emu::pinned_host_bytes() == pinned_before);
}

TEST_CASE("emulated device: offload without an fp32 master is refused on the CUDA backend, saying where it runs") {
    // The host update writes the fp32 master (train/optimizer_state.h): with fp32 or bf16
    // weights it would have to write device memory, so the trial is invalid, not failed.
    train::TrialOptions options;
    options.backend = BackendKind::cuda;
    options.log = nullptr;
    for (Precision p : {Precision::fp32, Precision::bf16}) {
        TrialConfig c = short_trial(Optimizer::adamw, p);
        c.zero_stage = 2, c.offload = Offload::optimizer;
        const auto nccl = train::make_nccl_comm(train::new_nccl_id(), 0, 1, train::NcclPlacement{0, nullptr});
        const TrialResult r = train::run_trial(c, options, *nccl);
        CHECK(r.status == TrialStatus::invalid);
        CHECK_THAT(r.reason, Catch::Contains("CPU backend only") && Catch::Contains("bf16-mixed"));
    }
}
