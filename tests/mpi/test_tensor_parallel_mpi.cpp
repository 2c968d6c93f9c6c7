// Tensor parallelism across real ranks (core/parallel_plan.h): tp ranks
// that split every layer train the model one rank trains whole, so after
// three steps in fp32 their losses are the single rank's within 1e-5, alone
// (tp = the world) and beside data parallelism with ZeRO 0-3 (2 x 2 on four
// ranks, against one rank with both replicas' rows), with and without
// sequence parallelism, with LoRA adapters split as their base is (QLoRA:
// within its per-shard quantization), and with KV heads replicated over more
// ranks than there are of them. Every rank's tagged peak equals the
// estimate, component by component, and the bytes the group moves equal the
// schedule's. Runs under 2 and 4 ranks.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <tuple>
#include <vector>

#include "core/parallel_plan.h"
#include "core/presets.h"
#include "estimate/estimate.h"
#include "estimate/tensor_parallel_calls.h"
#include "tests/mpi/mpi_session.h"
#include "tests/mpi/parallel_losses.h"
#include "tests/support/trainer_fixture.h"
#include "train/comm/comm_mpi.h"
#include "train/lora.h"
#include "train/trainer.h"
#include "train/trial.h"

namespace {

using namespace tune;
using test::losses, test::single_rank_losses, test::worst;

// `small`: 8 heads, 4 KV heads, ffn 688, vocabulary 2048: tp 2 and 4 split all of them.
TrialConfig tp_config(Optimizer o, std::uint32_t tp, std::uint32_t world, std::uint32_t stage, bool sp = false) {
    TrialConfig c;
    c.sequence_parallel = sp;
    c.model = *find_model("small");
    c.optimizer = o, c.precision = Precision::fp32, c.zero_stage = stage;
    c.world_size = world, c.tensor_parallel = tp;
    c.micro_batch = 1, c.context = 16, c.steps = 3, c.warmup = 0;
    c.clip = 1.0;  // LOMO's norm pass, and the global norm over the shards, both run
    c.eps = 1e-4;  // Adam's first steps smooth in g: fp32 reordering cannot flip a tiny gradient's update
    return c;
}

// This rank's place in a tensor-parallel group that is the world.
train::ParallelRank parallel_rank(const train::Comm& comm, const TrialConfig& c) {
    const auto rank = static_cast<std::uint32_t>(comm.rank());
    return {rank, rank / static_cast<std::uint32_t>(parallel_plan(c).kv_replicas(c.model))};
}

// Each adapter gradient of this tensor-parallel rank against the whole adapter's at the elements its shard
// holds (replicated tensors whole): ||mine - theirs|| / ||theirs||, checked against `tolerance`. Returns
// that over all the rank's adapters.
double check_adapter_grads(const train::HostParams& g, const train::HostParams& ref, const train::ParamLayout& mine,
                           const train::LayoutSource& from, double tolerance) {
    double all_diff = 0, all_norm = 0;
    for (std::size_t i = 0; i < mine.buffers(); ++i)
        for (std::size_t t = 0; t < mine.flat(i).tensors.size(); ++t) {
            const train::TensorView& v = mine.flat(i).tensors[t];
            const train::TensorSource& s = from[i][t];
            double diff = 0, norm = 0;
            for (std::int64_t e = 0; e < v.numel(); ++e) {
                const std::int64_t at = s.offset + (s.row_begin + e / v.cols) * s.cols + s.col_begin + e % v.cols;
                const double d = static_cast<double>(g[i][v.offset + e]) - ref[i][at];
                diff += d * d, norm += static_cast<double>(ref[i][at]) * ref[i][at];
            }
            INFO("layer " << i << " " << v.name << (s.replicated ? " (whole on every rank)" : "")
                          << ": relative difference " << std::sqrt(diff / norm));
            CHECK(norm > 0);
            CHECK(std::sqrt(diff) <= tolerance * std::sqrt(norm));
            all_diff += diff, all_norm += norm;
        }
    return std::sqrt(all_diff / all_norm);
}

// After one step (B is no longer zero, so every adapter has a gradient), the adapters' gradients of the
// tensor-parallel configuration `c` (tp = the world) against one rank's.
double check_adapter_grads_after_a_step(train::Comm& comm, const TrialConfig& c, double tolerance) {
    kernels::CpuBackend backend{kernels::CpuBackendOptions{1, 0}};
    const auto tokens = train::synthetic_tokens(c.seed, c.model.vocab);
    train::Trainer split_trainer(backend, comm, c, *tokens);
    split_trainer.step();
    split_trainer.compute_gradients();
    TrialConfig one = c;
    one.world_size = 1, one.tensor_parallel = 1, one.sequence_parallel = false;
    test::TrainerRig single(one, train::synthetic_tokens(one.seed, one.model.vocab));
    single.trainer->step();
    single.trainer->compute_gradients();
    const train::ParamLayout& mine = split_trainer.model().layout();
    return check_adapter_grads(split_trainer.model().download_grads(), single.trainer->model().download_grads(), mine,
                               train::adapter_parallel_source(c, mine, parallel_rank(comm, c)), tolerance);
}

}  // namespace

TEST_CASE("tensor-parallel ranks give one rank's losses after three steps, AdamW, Lion and LOMO",
          "[mpi][tensor-parallel]") {
    train::MpiComm comm(test::mpi_runtime());
    const auto n = static_cast<std::uint32_t>(comm.world_size());
    for (const auto& [o, sp] : {std::pair{Optimizer::adamw, false},
                                {Optimizer::lion, false},
                                {Optimizer::lomo, false},
                                {Optimizer::adamw, true},
                                {Optimizer::lion, true},
                                {Optimizer::lomo, true}}) {
        const TrialConfig c = tp_config(o, n, n, 0, sp);
        const std::vector<double> split = losses(comm, c), whole = single_rank_losses(c);
        INFO(summary(c) << ": step losses " << split[0] << ", " << split[1] << ", " << split[2] << " against "
                        << whole[0] << ", " << whole[1] << ", " << whole[2] << "; largest difference "
                        << worst(split, whole));
        CHECK(worst(split, whole) < 1e-5);
    }
}

TEST_CASE("tensor parallelism with biases, NEFTune's noise, selective-op checkpointing and LOMO's q/k norms",
          "[mpi][tensor-parallel]") {
    // A row-parallel bias goes once into the sum the group reduces; NEFTune's noise too; selective-op
    // recomputes its rows of the norms and gathers the regions' inputs again; LOMO sums the q/k norms'
    // gradients over the group before it applies them.
    train::MpiComm comm(test::mpi_runtime());
    const auto n = static_cast<std::uint32_t>(comm.world_size());
    for (bool sp : {false, true})
        for (Optimizer o : {Optimizer::adamw, Optimizer::lomo}) {
            TrialConfig c = tp_config(o, n, n, 0, sp);
            c.model.qkv_bias = c.model.o_bias = c.model.mlp_bias = c.model.qk_norm = true;
            c.neftune_alpha = 5, c.checkpointing = Checkpointing::selective_op;
            const std::vector<double> split = losses(comm, c), whole = single_rank_losses(c);
            INFO(summary(c) << " with biases, q/k norms: step losses " << split[0] << ", " << split[1] << ", "
                            << split[2] << " against " << whole[0] << ", " << whole[1] << ", " << whole[2]
                            << "; largest difference " << worst(split, whole));
            CHECK(worst(split, whole) < 1e-5);
        }
}

TEST_CASE("Adafactor and 8-bit Adam under tensor parallelism: statistics over each rank's shard, not the tensor",
          "[mpi][tensor-parallel]") {
    // Adafactor factors a matrix's second moment into row and column means over the shard a rank
    // holds: a column-parallel matrix's column means average its rows only, a row-parallel one's row
    // means its columns only. Its losses move off one rank's after the first update (the first step's
    // loss, before any update, is the same). 8-bit Adam quantizes its states in blocks of the rank's
    // flat buffer: a column-parallel shard is whole rows, the same blocks as one rank's; a row-parallel
    // (o, down) shard cuts each row, so its blocks and their absmax differ. Those states' quantization
    // error is far below the update: its losses stay within this test's tolerance of one rank's.
    train::MpiComm comm(test::mpi_runtime());
    const auto n = static_cast<std::uint32_t>(comm.world_size());
    const TrialConfig factored = tp_config(Optimizer::adafactor, n, n, 0);
    const std::vector<double> split = losses(comm, factored), whole = single_rank_losses(factored);
    INFO(summary(factored) << ": step losses " << split[0] << ", " << split[1] << ", " << split[2] << " against "
                           << whole[0] << ", " << whole[1] << ", " << whole[2]);
    CHECK(std::abs(split[0] - whole[0]) < 1e-5);
    CHECK(worst(split, whole) > 1e-5);
    CHECK(worst(split, whole) < 1e-2);
    const TrialConfig blocks = tp_config(Optimizer::adam8bit, n, n, 0);
    CHECK(worst(losses(comm, blocks), single_rank_losses(blocks)) < 1e-4);
}

TEST_CASE("Qwen3's q/k norms under tensor parallelism: their weights' gradients sum over the heads' ranks",
          "[mpi][tensor-parallel]") {
    train::MpiComm comm(test::mpi_runtime());
    const auto n = static_cast<std::uint32_t>(comm.world_size());
    for (bool sp : {false, true}) {
        TrialConfig c = tp_config(Optimizer::adamw, n, n, 0, sp);
        c.model.qk_norm = true;
        const std::vector<double> split = losses(comm, c), whole = single_rank_losses(c);
        INFO(summary(c) << " with q/k norms: last loss " << split[2] << " against " << whole[2]
                        << "; largest difference " << worst(split, whole));
        CHECK(worst(split, whole) < 1e-5);
        // Adam's first steps hardly see a gradient's scale: compare the norms' gradients themselves.
        kernels::CpuBackend backend{kernels::CpuBackendOptions{1, 0}};
        const auto tokens = train::synthetic_tokens(c.seed, c.model.vocab);
        train::Trainer split_trainer(backend, comm, c, *tokens);
        split_trainer.compute_gradients();
        TrialConfig one = c;
        one.world_size = 1, one.tensor_parallel = 1, one.sequence_parallel = false;
        test::TrainerRig single(one, train::synthetic_tokens(one.seed, one.model.vocab));
        single.trainer->compute_gradients();
        const train::HostParams g = split_trainer.model().download_grads(),
                                ref = single.trainer->model().download_grads();
        for (train::LayerTensor t : {train::LayerTensor::q_norm, train::LayerTensor::k_norm,
                                     train::LayerTensor::attn_norm, train::LayerTensor::mlp_norm}) {
            const train::TensorView& mine = split_trainer.layout().at(t);
            const train::TensorView& theirs = single.trainer->layout().at(t);
            double most = 0, scale = 0;
            for (std::int64_t e = 0; e < mine.numel(); ++e) {
                most = std::max(most, std::abs(static_cast<double>(g[0][mine.offset + e]) - ref[0][theirs.offset + e]));
                scale = std::max(scale, std::abs(static_cast<double>(ref[0][theirs.offset + e])));
            }
            INFO(mine.name << ": largest difference " << most << " of " << scale);
            CHECK(most <= 1e-5 * scale);
        }
    }
}

TEST_CASE("LoRA under tensor parallelism: adapters follow their base's split and give one rank's losses and gradients",
          "[mpi][tensor-parallel][lora]") {
    train::MpiComm comm(test::mpi_runtime());
    const auto n = static_cast<std::uint32_t>(comm.world_size());
    for (bool sp : {false, true}) {
        TrialConfig c = tp_config(Optimizer::adamw, n, n, 0, sp);
        c.method = Method::lora, c.lora_rank = 4, c.lora_targets = LoraTargets::all_linear;
        const std::vector<double> split = losses(comm, c), whole = single_rank_losses(c);
        INFO(summary(c) << ": step losses " << split[0] << ", " << split[1] << ", " << split[2] << " against "
                        << whole[0] << ", " << whole[1] << ", " << whole[2] << "; largest difference "
                        << worst(split, whole));
        CHECK(worst(split, whole) < 1e-5);
        // Each element of this rank's shard equals the whole adapter's gradient there.
        check_adapter_grads_after_a_step(comm, c, 1e-4);
    }
}

TEST_CASE("KV heads replicated over more ranks than they are: the ranks sharing one sum its gradients",
          "[mpi][tensor-parallel]") {
    // Megatron's grouped-query split when tp > kv_heads: each rank holds one KV head, and the tp / kv_heads
    // ranks holding the same one each back-propagate their own query heads into it.
    train::MpiComm comm(test::mpi_runtime());
    const auto n = static_cast<std::uint32_t>(comm.world_size());
    for (std::uint32_t kv = 1; kv < n; kv *= 2)
        for (const auto& [o, sp, method] : {std::tuple{Optimizer::adamw, false, Method::full},
                                            {Optimizer::lomo, true, Method::full},
                                            {Optimizer::adamw, true, Method::lora}}) {
            TrialConfig c = tp_config(o, n, n, 0, sp);
            c.model.kv_heads = kv, c.model.qkv_bias = true;
            c.method = method, c.lora_rank = 4;
            const std::vector<double> split = losses(comm, c), whole = single_rank_losses(c);
            INFO(summary(c) << " with " << kv << " KV heads: step losses " << split[0] << ", " << split[1] << ", "
                            << split[2] << " against " << whole[0] << ", " << whole[1] << ", " << whole[2]
                            << "; largest difference " << worst(split, whole));
            CHECK(worst(split, whole) < 1e-5);
            if (c.adapters()) check_adapter_grads_after_a_step(comm, c, 1e-4);
        }
}

TEST_CASE("offload under tensor parallelism: each rank's host update of its shard gives one rank's losses",
          "[mpi][tensor-parallel][offload]") {
    // The host holds the gradients, master and states of the rank's shard; the group sums its replicated
    // tensors' gradients there (the norms', with sequence parallelism) before the update.
    train::MpiComm comm(test::mpi_runtime());
    const auto n = static_cast<std::uint32_t>(comm.world_size());
    for (const auto& [offload, sp, method] : {std::tuple{Offload::optimizer, true, Method::full},
                                              {Offload::optimizer_params, false, Method::full},
                                              {Offload::optimizer, false, Method::lora}}) {
        TrialConfig c = tp_config(Optimizer::adamw, n, n, offload == Offload::optimizer ? 2 : 3, sp);
        c.offload = offload, c.method = method, c.lora_rank = 4;
        const std::vector<double> split = losses(comm, c), whole = single_rank_losses(c);
        INFO(summary(c) << ": step losses " << split[0] << ", " << split[1] << ", " << split[2] << " against "
                        << whole[0] << ", " << whole[1] << ", " << whole[2] << "; largest difference "
                        << worst(split, whole));
        CHECK(worst(split, whole) < 1e-5);
    }
}

TEST_CASE("QLoRA under tensor parallelism: each rank quantizes its shard of the base", "[mpi][tensor-parallel][lora]") {
    // NF4 quantizes each rank's flat shard in blocks of 64 and double-quantizes their absmax in groups:
    // its dequantized base is one rank's but for part of a quantization step, so the adapters' gradients
    // are one rank's within that (a base drawn anew, or an adapter not summed over the group, is off by
    // its whole size).
    train::MpiComm comm(test::mpi_runtime());
    const auto n = static_cast<std::uint32_t>(comm.world_size());
    TrialConfig c = tp_config(Optimizer::adamw, n, n, 0);
    c.method = Method::qlora, c.precision = Precision::bf16_mixed, c.lora_rank = 4;
    const double all = check_adapter_grads_after_a_step(comm, c, 1.0);
    INFO("all adapters: relative difference " << all);
    CHECK(all < 0.1);
}

TEST_CASE("tensor x data parallel 2 x 2 with ZeRO 0-3 gives one rank's losses", "[mpi][tensor-parallel][zero]") {
    train::MpiComm comm(test::mpi_runtime());
    const auto n = static_cast<std::uint32_t>(comm.world_size());
    if (n != 4) return;  // the grid needs four ranks (ctest mpi_ranks_4)
    for (std::uint32_t stage = 0; stage <= 3; ++stage) {
        const TrialConfig c = tp_config(Optimizer::adamw, 2, 4, stage, stage % 2 == 1);  // 1 and 3 with sp
        const std::vector<double> split = losses(comm, c), whole = single_rank_losses(c);
        INFO(summary(c) << ": last loss " << split[2] << " against " << whole[2] << "; largest difference "
                        << worst(split, whole));
        CHECK(worst(split, whole) < 1e-5);
    }
    for (std::uint32_t stage : {1u, 3u}) {  // the adapters sharded over the replicas
        TrialConfig c = tp_config(Optimizer::adamw, 2, 4, stage, stage == 3);
        c.method = Method::lora, c.lora_rank = 4;
        const std::vector<double> split = losses(comm, c), whole = single_rank_losses(c);
        INFO(summary(c) << ": last loss " << split[2] << " against " << whole[2] << "; largest difference "
                        << worst(split, whole));
        CHECK(worst(split, whole) < 1e-5);
    }
}

TEST_CASE("the bytes the tensor-parallel collectives move equal the schedule's", "[mpi][tensor-parallel]") {
    train::MpiComm comm(test::mpi_runtime());
    const auto n = static_cast<std::uint32_t>(comm.world_size());
    for (const auto& [ck, sp, method] : {std::tuple{Checkpointing::none, false, Method::full},
                                         {Checkpointing::full, false, Method::full},
                                         {Checkpointing::none, true, Method::full},
                                         {Checkpointing::full, true, Method::full},
                                         {Checkpointing::selective_op, true, Method::full},
                                         {Checkpointing::none, false, Method::lora},
                                         {Checkpointing::full, true, Method::lora}}) {
        TrialConfig c = tp_config(Optimizer::adamw, n, n, 0, sp);  // one replica: no data-parallel traffic
        c.checkpointing = ck, c.grad_accum = 2, c.method = method, c.lora_rank = 4;
        c.model.kv_heads = ck == Checkpointing::full ? 1 : 4;  // KV heads shared by the ranks, or split
        train::MpiComm fresh(test::mpi_runtime());             // counts from zero
        const TrialResult r = train::run_trial(c, test::quiet_trial(), fresh);
        INFO(summary(c) << ": " << r.reason);
        REQUIRE(r.status == TrialStatus::ok);
        CHECK(static_cast<double>(r.comm_bytes) ==
              Approx(tensor_parallel_bytes(tensor_parallel_calls(c.model, c))).epsilon(1e-9));
    }
}

TEST_CASE("every tensor-parallel rank's measured peak equals the estimate, component by component",
          "[mpi][tensor-parallel][memory]") {
    train::MpiComm comm(test::mpi_runtime());
    const auto n = static_cast<std::uint32_t>(comm.world_size());
    for (std::uint32_t stage : {0u, 3u})
        for (const auto& [ck, sp, method] : {std::tuple{Checkpointing::none, false, Method::full},
                                             {Checkpointing::full, false, Method::full},
                                             {Checkpointing::none, true, Method::full},
                                             {Checkpointing::full, true, Method::full},
                                             {Checkpointing::selective, true, Method::full},
                                             {Checkpointing::selective_op, true, Method::full},
                                             {Checkpointing::none, true, Method::lora},
                                             {Checkpointing::full, false, Method::lora},
                                             {Checkpointing::none, false, Method::qlora},
                                             {Checkpointing::full, true, Method::qlora}}) {
            TrialConfig c = tp_config(Optimizer::adamw, 2, n, stage, sp);
            c.precision = Precision::bf16_mixed, c.checkpointing = ck, c.steps = 2;
            c.method = method, c.lora_rank = 4;
            if (ck == Checkpointing::full) c.model.kv_heads = 1;  // one KV head on both ranks
            // Offload (ZeRO 3, the parameters too): the host ledger, apart from the device's.
            if (ck == Checkpointing::selective && stage == 3 && method == Method::full)
                c.offload = Offload::optimizer_params;
            const TrialResult r = train::run_trial(c, test::quiet_trial(), comm);
            INFO(summary(c) << " on " << n << " ranks: " << r.reason);
            REQUIRE(r.status == TrialStatus::ok);
            EstimateOptions eo;
            eo.cpu_threads = 1;
            eo.overhead_bytes = r.memory[Component::overhead];
            const Estimate e = estimate(c, *find_device("cpu"), eo);
            for (Component k : kComponents) {
                INFO(to_string(k) << ": measured " << r.memory[k] << ", estimated " << e.memory[k]);
                CHECK(r.memory[k] == e.memory[k]);
            }
            for (std::size_t i = 0; i < r.rank_peaks.size(); ++i)
                CHECK(r.rank_peaks[i] - r.rank_baselines[i] == e.memory.peak - e.memory[Component::overhead]);
            for (Component k : kComponents) {
                INFO("host " << to_string(k) << ": measured " << r.host_memory[k] << ", estimated "
                             << e.host_memory[k]);
                CHECK(r.host_memory[k] == e.host_memory[k]);
            }
        }
}
