// Two ranks of the emulated device under mpirun (label cuda-emu;mpi), each
// process its own device, talking through the emulated NCCL, whose
// collectives are MPI's: the collectives' values per dtype, `tune selftest
// --gpus 2`'s ZeRO comparison with the CPU, and short trials per optimizer,
// precision and ZeRO stage against the same trials on CPU ranks over MPI.
// Collectives run in the same order on every rank whatever the checks say.
#include <nccl.h>
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <tuple>
#include <vector>

#include "core/presets.h"
#include "estimate/estimate.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/math/half.h"
#include "tests/cuda_emu/offload_checks.h"
#include "tests/cuda_emu/short_trial.h"
#include "tests/mpi/mpi_session.h"
#include "train/comm/comm_error.h"
#include "train/comm/comm_mpi.h"
#include "train/comm/comm_nccl.h"
#include "train/selftest_training.h"
#include "train/trainer.h"
#include "train/trial.h"

using namespace tune;

namespace {

using kernels::DType;

std::unique_ptr<train::Comm> nccl_on(kernels::Backend& backend) {
    return train::make_nccl_comm(test::mpi_runtime(), 0, &backend);
}

// Values exact in every float dtype; rank r's element i.
float value(int rank, std::int64_t i) { return static_cast<float>(rank + 1) + 0.25f * static_cast<float>(i % 16); }

std::vector<std::uint16_t> encode(const std::vector<float>& v, DType t) {
    std::vector<std::uint16_t> out;
    for (float x : v) out.push_back(t == DType::bf16 ? math::to_bf16(x).bits : math::to_fp16(x).bits);
    return out;
}

std::vector<float> decode(const std::vector<std::uint16_t>& v, DType t) {
    std::vector<float> out;
    for (auto b : v) out.push_back(t == DType::bf16 ? math::to_float(math::bf16{b}) : math::to_float(math::fp16{b}));
    return out;
}

// The buffer after `op` on it as `t` (host memory: the comm stages it through the device).
template <class Op>
std::vector<float> through(DType t, std::vector<float> v, Op&& op) {
    if (t == DType::f32) {
        op(v.data());
        return v;
    }
    std::vector<std::uint16_t> half = encode(v, t);
    op(half.data());
    return decode(half, t);
}

}  // namespace

TEST_CASE("emulated nccl: ncclCommSplit makes one-rank and two-rank groups on the backend's stream",
          "[cuda-emu][mpi]") {
    auto backend = kernels::make_cuda_backend(0);
    const std::unique_ptr<train::Comm> world = nccl_on(*backend);
    const int r = world->rank();
    // Alone: each rank its own group, where a sum is the rank's own value.
    const std::unique_ptr<train::Comm> alone = world->split(r, 0);
    CHECK(alone->world_size() == 1);
    CHECK(alone->rank() == 0);
    // Together, ranked in reverse by the key.
    const std::unique_ptr<train::Comm> both = world->split(7, -r);
    CHECK(both->world_size() == 2);
    CHECK(both->rank() == 1 - r);
    const auto sum_in = [&](train::Comm& comm) {
        return through(DType::f32, {static_cast<float>(r + 1)},
                       [&](void* p) { comm.all_reduce(p, 1, DType::f32, train::ReduceOp::sum); })[0];
    };
    CHECK(sum_in(*alone) == static_cast<float>(r + 1));
    CHECK(sum_in(*both) == 3.0f);
    CHECK(alone->bytes_moved() == 0);
    // A split's NCCL buffers are its own, measured as an init's are (the trial adds the groups' to its overhead).
    CHECK(both->device_bytes() == tune_emu::kNcclCommBytes);
    CHECK_THROWS(world->split(-1, 0));
}

namespace {

// Two steps of the tiny model on 2 ranks.
TrialConfig two_rank_trial(Optimizer o, Precision p, std::uint32_t stage) {
    TrialConfig c = tune_emu_test::tiny_short_trial(o, p);
    c.zero_stage = stage;
    c.world_size = 2;
    c.checkpointing = static_cast<Checkpointing>(stage % 3);
    return c;
}

// The trial on the emulated device over NCCL and on CPU ranks over MPI: both ok, each step's loss within the
// self-test's training tolerance (fp32 to rounding, 16-bit to a few of its ulps). Returns the device's.
TrialResult device_trial_matching_cpu(const TrialConfig& c) {
    train::TrialOptions on_gpu, on_cpu;
    on_gpu.backend = BackendKind::cuda;
    on_cpu.backend = BackendKind::cpu;
    on_gpu.log = on_cpu.log = nullptr;
    // The trial makes its own backend; the communicator's collectives wait for the device.
    auto nccl = train::make_nccl_comm(test::mpi_runtime(), train::NcclPlacement{0, nullptr});
    const TrialResult gpu = train::run_trial(c, on_gpu, *nccl);
    train::MpiComm mpi(test::mpi_runtime());
    const TrialResult cpu = train::run_trial(c, on_cpu, mpi);
    INFO(summary(c) << " on rank " << nccl->rank() << ": " << gpu.reason << cpu.reason);
    REQUIRE(gpu.status == TrialStatus::ok);
    REQUIRE(cpu.status == TrialStatus::ok);
    REQUIRE(gpu.losses.size() == c.steps);
    REQUIRE(cpu.losses.size() == c.steps);
    const double tolerance = c.precision == Precision::fp32 ? 1e-4 : 5e-2;
    for (std::size_t s = 0; s < c.steps; ++s) {
        INFO("step " << s << ": cuda " << gpu.losses[s] << ", cpu " << cpu.losses[s]);
        CHECK(std::abs(gpu.losses[s] - cpu.losses[s]) <= tolerance);
    }
    return gpu;
}

}  // namespace

TEST_CASE("emulated NCCL on 2 ranks: each collective's values in every float dtype, blocks placed by rank") {
    auto backend = kernels::make_cuda_backend(0);
    auto comm = nccl_on(*backend);
    const int n = comm->world_size(), me = comm->rank();
    REQUIRE(n == 2);
    constexpr std::int64_t kCount = 32;
    std::vector<float> mine(kCount);
    for (std::int64_t i = 0; i < kCount; ++i) mine[static_cast<std::size_t>(i)] = value(me, i);
    for (DType t : {DType::f32, DType::bf16, DType::f16}) {
        INFO(kernels::dtype_name(t));
        const auto sum = through(t, mine, [&](void* p) { comm->all_reduce(p, kCount, t, train::ReduceOp::sum); });
        const auto avg = through(t, mine, [&](void* p) { comm->all_reduce(p, kCount, t, train::ReduceOp::average); });
        const auto scattered =
            through(t, mine, [&](void* p) { comm->reduce_scatter(p, kCount, t, train::ReduceOp::sum); });
        const auto gathered = through(t, mine, [&](void* p) { comm->all_gather(p, kCount, t); });
        const auto sent = through(t, mine, [&](void* p) { comm->broadcast(p, kCount, t, 1); });
        const std::int64_t block = kCount / n;
        for (std::int64_t i = 0; i < kCount; ++i) {
            const auto k = static_cast<std::size_t>(i);
            CHECK(sum[k] == value(0, i) + value(1, i));
            CHECK(avg[k] == (value(0, i) + value(1, i)) / 2);
            if (i / block == me) CHECK(scattered[k] == value(0, i) + value(1, i));
            CHECK(gathered[k] == value(static_cast<int>(i / block), i));
            CHECK(sent[k] == value(1, i));
        }
    }
}

TEST_CASE("emulated NCCL on 2 ranks: every ZeRO stage matches the CPU (tune selftest --gpus 2)") {
    auto backend = kernels::make_cuda_backend(0);
    auto comm = nccl_on(*backend);
    train::ZeroSelftestOptions options;
    options.context = 32;
    const auto rows = train::zero_stages_against_cpu(*backend, *comm, options);
    REQUIRE(rows.size() == 4);
    if (comm->rank() != 0) return;  // rank 0 compares
    for (const auto& r : rows) {
        INFO("zero " << r.stage << ": params " << r.param_diff << " (tol " << r.param_tolerance << "), losses "
                     << r.loss_diff << " (tol " << r.loss_tolerance << ") " << r.error);
        CHECK(r.pass);
    }
}

TEST_CASE("emulated NCCL on 2 ranks: short trials per optimizer, precision and ZeRO stage match CPU ranks over MPI") {
    struct Combo {
        Optimizer optimizer;
        Precision precision;
        std::uint32_t stage;
    };
    const Combo combos[] = {{Optimizer::adamw, Precision::bf16_mixed, 1},
                            {Optimizer::lion, Precision::fp16_mixed, 2},
                            {Optimizer::adam8bit, Precision::fp32, 3},
                            {Optimizer::adafactor, Precision::bf16, 0},
                            {Optimizer::lomo, Precision::fp32, 0}};
    for (const Combo& k : combos) {
        const TrialConfig c = two_rank_trial(k.optimizer, k.precision, k.stage);
        const TrialResult gpu = device_trial_matching_cpu(c);
        INFO(summary(c));
        const Estimate e = estimate(c, *find_device("h100-80gb"), EstimateOptions{});
        CHECK(gpu.memory[Component::workspace] == e.memory[Component::workspace]);
    }
}

TEST_CASE("emulated NCCL on 2 ranks: tensor-parallel trials match CPU ranks, memory as estimated") {
    // Each rank holds half of every layer's matrices and of the vocabulary; the row-parallel outputs, the
    // regions' input gradients, the embedding and the head's statistics are summed over NCCL; so are the
    // adapters' replicated tensors' gradients (LoRA, QLoRA), and a shared KV head's over its two ranks.
    struct Combo {
        Optimizer optimizer;
        Precision precision;
        bool sequence_parallel;
        Method method = Method::full;
        std::uint64_t kv_heads = 2;  // tiny's; 1: both ranks hold the one KV head and sum its gradients
    };
    const Combo combos[] = {{Optimizer::adamw, Precision::bf16_mixed, false},
                            {Optimizer::lomo, Precision::fp32, false},
                            {Optimizer::lion, Precision::bf16_mixed, true},
                            {Optimizer::adamw, Precision::bf16_mixed, false, Method::lora},
                            {Optimizer::adamw, Precision::bf16_mixed, true, Method::qlora},
                            {Optimizer::adamw, Precision::bf16_mixed, false, Method::full, 1}};
    train::TrialOptions on_gpu;
    on_gpu.backend = BackendKind::cuda;
    on_gpu.log = nullptr;
    for (const auto& [optimizer, precision, sp, method, kv_heads] : combos) {
        TrialConfig c = two_rank_trial(optimizer, precision, 0);
        c.tensor_parallel = 2, c.sequence_parallel = sp, c.method = method, c.model.kv_heads = kv_heads;
        if (c.adapters()) c.lora_rank = 4;
        const TrialResult gpu = device_trial_matching_cpu(c);
        INFO(summary(c));
        const Estimate e = estimate(c, *find_device("h100-80gb"), EstimateOptions{});
        for (Component k : kComponents) {
            if (k == Component::overhead) continue;
            INFO(to_string(k) << ": measured " << gpu.memory[k] << ", estimated " << e.memory[k]);
            CHECK(gpu.memory[k] == e.memory[k]);
        }
    }
    // Offload under tensor parallelism sums host gradients over the group: the CPU backend's MPI does, NCCL not.
    TrialConfig offloaded = two_rank_trial(Optimizer::adamw, Precision::bf16_mixed, 2);
    offloaded.tensor_parallel = 2, offloaded.offload = Offload::optimizer;
    auto nccl = train::make_nccl_comm(test::mpi_runtime(), train::NcclPlacement{0, nullptr});
    const TrialResult refused = train::run_trial(offloaded, on_gpu, *nccl);
    CHECK(refused.status == TrialStatus::invalid);
    CHECK_THAT(refused.reason, Catch::Contains("CPU backend only") && Catch::Contains("tensor_parallel 2"));
}

TEST_CASE("emulated NCCL on 2 ranks: pipeline stages match CPU ranks, each stage's memory as estimated") {
    // One layer per stage; activations and their gradients go between the stages by grouped ncclSend and
    // ncclRecv, the loss and the norm over the pipeline group.
    for (const auto& [precision, method, checkpointing] :
         {std::tuple{Precision::fp32, Method::full, Checkpointing::none},
          {Precision::bf16_mixed, Method::lora, Checkpointing::none},
          {Precision::bf16_mixed, Method::full, Checkpointing::full}}) {
        TrialConfig c = two_rank_trial(Optimizer::adamw, precision, 0);
        c.pipeline_parallel = 2, c.grad_accum = 4, c.method = method, c.lora_rank = 4;
        c.checkpointing = checkpointing;
        const TrialResult gpu = device_trial_matching_cpu(c);
        INFO(summary(c));
        // Each rank's ledger against its own stage's estimate (the trial reports the highest rank's only).
        auto backend = kernels::make_cuda_backend(0);
        auto comm = nccl_on(*backend);
        const auto tokens = train::synthetic_tokens(c.seed, c.model.vocab);
        train::Trainer trainer(*backend, *comm, c, *tokens);
        for (std::uint32_t s = 0; s < c.steps; ++s) trainer.step();
        const Estimate e = estimate(c, *find_device("h100-80gb"), EstimateOptions{});
        REQUIRE(e.stages.size() == 2);
        const MemoryBreakdown& predicted = e.stages[static_cast<std::size_t>(comm->rank())].memory;
        const MemoryBreakdown& measured = trainer.memory().peak_breakdown();
        for (Component k : kComponents) {
            if (k == Component::overhead) continue;
            INFO(to_string(k) << ": measured " << measured[k] << ", estimated " << predicted[k]);
            CHECK(measured[k] == predicted[k]);
        }
    }
}

TEST_CASE("emulated NCCL on 2 ranks: offload trials match CPU ranks, each rank's ledgers as estimated") {
    // Each rank's gradient shard reduced on the device into its pinned host
    // shard, updated there, cast back and (stage 2) all-gathered over NCCL.
    struct Combo {
        Optimizer optimizer;
        Precision precision;
        std::uint32_t stage;
        Offload offload;
    };
    const Combo combos[] = {{Optimizer::adamw, Precision::bf16_mixed, 2, Offload::optimizer},
                            {Optimizer::lion, Precision::fp16_mixed, 3, Offload::optimizer_params}};
    train::TrialOptions on_gpu, on_cpu;
    on_gpu.backend = BackendKind::cuda;
    on_cpu.backend = BackendKind::cpu;
    on_gpu.log = on_cpu.log = nullptr;
    for (const Combo& k : combos) {
        TrialConfig c = two_rank_trial(k.optimizer, k.precision, k.stage);
        c.offload = k.offload;
        auto nccl = train::make_nccl_comm(test::mpi_runtime(), train::NcclPlacement{0, nullptr});
        const TrialResult gpu = train::run_trial(c, on_gpu, *nccl);
        train::MpiComm mpi(test::mpi_runtime());
        INFO("rank " << nccl->rank());
        const Estimate e = tune_emu_test::check_offload_trial(c, gpu, train::run_trial(c, on_cpu, mpi));
        REQUIRE(gpu.rank_host_peaks.size() == 2);
        for (std::uint64_t peak : gpu.rank_host_peaks) CHECK(peak == e.host_memory.peak);
    }
}

TEST_CASE("emulated NCCL on 2 ranks: grouped sends and receives exchange both ways, host and device buffers") {
    auto backend = kernels::make_cuda_backend(0);
    auto comm = nccl_on(*backend);
    const int n = comm->world_size(), me = comm->rank(), peer = 1 - me;
    REQUIRE(n == 2);
    constexpr std::int64_t kCount = 48;
    std::vector<float> mine(kCount), theirs(kCount, -1.0f);
    for (std::int64_t i = 0; i < kCount; ++i) mine[static_cast<std::size_t>(i)] = value(me, i);
    // Both ranks send first: the batch posts everything before it waits.
    const train::P2POp ring[] = {{train::P2POp::Kind::send, mine.data(), kCount, DType::f32, peer},
                                 {train::P2POp::Kind::recv, theirs.data(), kCount, DType::f32, peer}};
    comm->send_recv(ring);
    for (std::int64_t i = 0; i < kCount; ++i) CHECK(theirs[static_cast<std::size_t>(i)] == value(peer, i));
    CHECK(comm->bytes_moved() == kCount * sizeof(float));
    // bf16 in device memory, one blocking send from rank 0 to rank 1.
    const std::size_t bytes = kCount * sizeof(std::uint16_t);
    auto* device = static_cast<std::uint16_t*>(backend->allocate(bytes));
    const std::vector<std::uint16_t> sent = encode(mine, DType::bf16);
    if (me == 0) {
        std::memcpy(device, sent.data(), bytes);
        comm->send(device, kCount, DType::bf16, 1);
    } else {
        std::memset(device, 0, bytes);
        comm->recv(device, kCount, DType::bf16, 0);
        std::vector<std::uint16_t> got(kCount);
        std::memcpy(got.data(), device, bytes);
        for (std::int64_t i = 0; i < kCount; ++i)
            CHECK(decode(got, DType::bf16)[static_cast<std::size_t>(i)] == value(0, i));
    }
    backend->deallocate(device, bytes);
    CHECK_THROWS_AS(comm->send(mine.data(), kCount, DType::f32, 2), train::CommError);
    CHECK_THROWS_AS(comm->send(mine.data(), kCount, DType::f32, me), train::CommError);
}
