// The per-phase memory of docs/memory-model.md: two configurations derived
// by hand to the byte, and properties over random configurations.
#include <catch2/catch.hpp>

#include <random>

#include "core/presets.h"
#include "estimate/estimate.h"
#include "estimate/model_states.h"

using namespace tune;

namespace {

// The hand-derived numbers keep the eager probabilities P; flash has its own case.
TrialConfig config_for(const char* model, Attention attention = Attention::eager) {
    TrialConfig c;
    c.model = *find_model(model);
    c.attention = attention;
    return c;
}

}  // namespace

TEST_CASE("hand-derived: tiny, AdamW fp32, one rank, no checkpointing", "[estimate][memory]") {
    // tiny: V 256, h 64, L 2, 4 heads, 2 KV heads -> d 16, kv 32, f 176.
    TrialConfig c = config_for("tiny");
    c.optimizer = Optimizer::adamw;
    c.precision = Precision::fp32;
    c.micro_batch = 2;
    c.context = 64;
    c.checkpointing = Checkpointing::none;
    EstimateOptions o;
    o.cpu_threads = 1;
    const StepMemory m = step_memory(c.model, c, *find_device("cpu"), o);

    // Slots: norms 64 -> 256, q 4096, k 2048, v 2048, o 4096, gate/up/down 11264 each.
    // Layer 46592, outer 16384 + 256 + 16384 = 33024; all: 2*46592 + 33024 = 126208 elements.
    const ComponentBytes& p = m.at_peak();
    CHECK(p[Component::params] == 4 * 126208);
    CHECK(p[Component::grads] == 4 * 126208);
    CHECK(p[Component::master] == 0);
    CHECK(p[Component::optim] == 8 * 126208);
    // Attention scratch, 1 thread: 4 * (2*64*64 + 8*64*16) = 65536; fp32 GEMMs need none.
    CHECK(p[Component::workspace] == 65536);
    CHECK(p[Component::overhead] == 0);
    CHECK(p[Component::comm] == 0);

    // T = 128 tokens. K_none = 4*128*(6*64 + 2*32 + 3*176) + 2*512 + P (4*2*4*64*64 = 131072) = 631808.
    // Layer backward of layer 1: io 1536 + K (layer 0) + K (layer 1) + dX 32768
    //   + scratch 4*128*(64 + max(528, 192)) = 303104  ->  1601024.
    // Head: io + 2K + xL, nf, dnf (3*32768) + rstd_f 512 = 1363968, + logits 4*128*256 = 131072.
    CHECK(m.peak_phase == Phase::layer_backward);
    CHECK(p[Component::activations] == 1601024);
    CHECK(p[Component::logits] == 0);
    CHECK(m.at(Phase::head_backward)[Component::activations] == 1363968);
    CHECK(m.at(Phase::head_backward)[Component::logits] == 131072);
    CHECK(m.at(Phase::forward)[Component::activations] == 1536 + 2 * 631808 + 32768);
    CHECK(m.at(Phase::embed_backward)[Component::activations] == 1536 + 32768);
    CHECK(m.at(Phase::optimizer_step).total() == 4 * 126208 * 4 + 65536);
    CHECK(m.peak == 4 * 126208 * 4 + 65536 + 1601024);
    CHECK(m.peak == 3685888);
}

TEST_CASE("hand-derived: small, 8-bit Adam bf16-mixed, ZeRO-2 on 4 ranks, full checkpointing", "[estimate][memory]") {
    // small: V 2048, h 256, L 4, 8 heads, 4 KV heads -> d 32, kv 128, f 688.
    TrialConfig c = config_for("small");
    c.optimizer = Optimizer::adam8bit;
    c.precision = Precision::bf16_mixed;
    c.zero_stage = 2;
    c.world_size = 4;
    c.micro_batch = 1;
    c.context = 256;
    c.grad_accum = 4;
    c.checkpointing = Checkpointing::full;
    EstimateOptions o;
    o.cpu_threads = 2;
    const StepMemory m = step_memory(c.model, c, *find_device("cpu"), o);
    const ComponentBytes& p = m.at_peak();

    // Layer 725504 elements: shard ceil(725504/4) = 181376 -> 181504 (709 x 256), full 726016.
    // Outer 1048832: shard 262208 -> 262400 (1025 x 256), full 1049600.
    CHECK(p[Component::params] == 2 * (4 * 726016 + 1049600));  // bf16, whole (stage 2)
    CHECK(p[Component::master] == 4 * (4 * 181504 + 262400));   // fp32, sharded
    CHECK(p[Component::grads] == 2 * (4 * 181504 + 262400));    // bf16, sharded
    // 8-bit: codes 2/element, absmax 2 x 4 bytes per 256-block, fp32 m, v of small tensors (norms 512, 256).
    CHECK(p[Component::optim] == 4 * (2 * 181504 + 8 * 709 + 8 * 512) + (2 * 262400 + 8 * 1025 + 8 * 256));
    // Largest workspace: the bf16 gate/up/down GEMM staging 4*(256*256 + 256*688 + 688*256) = 1671168,
    // above 2 threads of attention scratch 8*(2*256*256 + 8*256*32) = 1572864.
    CHECK(p[Component::workspace] == 1671168);

    // Peak in the head: io 3072 + 4 kept inputs (4*131072) + xL, nf, dnf (3*131072) + rstd_f 1024 = 921600,
    // LM-head workspace: chunk = 256 rows (2^24/2048 = 8192 > T):
    //   fp32 logits 2097152 + bf16 dlogits 1048576 + GEMM staging 4*(256*2048 + 2048*256 + 256*256) = 4456448,
    // outer bucket 2 * 1049600.
    CHECK(m.peak_phase == Phase::head_backward);
    CHECK(p[Component::activations] == 921600);
    CHECK(p[Component::logits] == 2097152 + 1048576 + 4456448);
    CHECK(p[Component::comm] == 2 * 1049600);
    // Layer backward: io + 3 inputs + K_none 3024896 + dX + scratch 2*256*(256 + 3*688) = 1187840, bucket 2*726016.
    CHECK(m.at(Phase::layer_backward)[Component::activations] == 3072 + 3 * 131072 + 3024896 + 131072 + 1187840);
    CHECK(m.at(Phase::layer_backward)[Component::comm] == 2 * 726016);
    CHECK(m.peak == 7907328 + 3953664 + 1976832 + 2026152 + 1671168 + 921600 + 7602176 + 2099200);
    CHECK(m.peak == 28158120);
}

TEST_CASE("ZeRO-3 gathers one layer at a time and LOMO holds one gradient", "[estimate][memory]") {
    TrialConfig c = config_for("small");
    c.precision = Precision::bf16;
    c.zero_stage = 3;
    c.world_size = 4;
    const Hardware cpu = *find_device("cpu");
    const StepMemory z3 = step_memory(c.model, c, cpu, {});
    // Gathered layer (bf16) + its gradient bucket (bf16) in the layer backward; the forward only gathers.
    CHECK(z3.at(Phase::layer_backward)[Component::comm] == 2 * 2 * 726016);
    CHECK(z3.at(Phase::forward)[Component::comm] == 2 * 726016);
    CHECK(z3.at(Phase::embed_backward)[Component::comm] == 2 * 1049600);  // bucket only: no gather

    c.optimizer = Optimizer::lomo;
    const StepMemory lomo = step_memory(c.model, c, cpu, {});
    CHECK(lomo.at(Phase::layer_backward)[Component::comm] == 2 * 726016);      // gathers, no bucket
    CHECK(lomo.at(Phase::layer_backward)[Component::grads] == 2 * 688 * 256);  // one FFN matrix
    CHECK(lomo.at(Phase::optimizer_step)[Component::grads] == 0);
    CHECK(lomo.at(Phase::optimizer_step)[Component::optim] == 0);
}

TEST_CASE("the CUDA backend adds the device overhead and the kernels' own workspace", "[estimate][memory]") {
    TrialConfig c = config_for("llama-7b");
    c.precision = Precision::bf16_mixed;
    const Hardware h100 = *find_device("h100-80gb");
    EstimateOptions o;
    StepMemory m = step_memory(c.model, c, h100, o);
    CHECK(m.at_peak()[Component::overhead] == h100.runtime_overhead_bytes);
    // Attention's (H, S, S) fp32 scores and bf16 dS for one sequence, after
    // cuBLASLt's 32 MiB: 32 * 128^2 * (4 + 2) bytes at the default context.
    const std::uint64_t mib32 = 32ull << 20;
    CHECK(m.at_peak()[Component::workspace] == mib32 + 32 * 128 * 128 * 4 + 32 * 128 * 128 * 2);
    // The LM head's chunk carries a cuBLASLt workspace too.
    const ActivationSizes a = activation_sizes(c.model, c, h100, o);
    const std::uint64_t cells = a.chunk_rows * 32000;
    CHECK(a.logits == (4 * cells + 255) / 256 * 256 + (2 * cells + 255) / 256 * 256 + mib32);
    // The figures: 3.2 GB at 4k and 12.9 GB at 8k per rank, not 32 MiB.
    c.context = 4096;
    CHECK(step_memory(c.model, c, h100, o).at_peak()[Component::workspace] == mib32 + 32ull * 4096 * 4096 * 6);
    c.context = 8192;
    CHECK(step_memory(c.model, c, h100, o).at_peak()[Component::workspace] == mib32 + 32ull * 8192 * 8192 * 6);
    c.context = 128;
    o.overhead_bytes = 3ull << 30;  // calibrated by the driver
    m = step_memory(c.model, c, h100, o);
    CHECK(m.at_peak()[Component::overhead] == 3ull << 30);
}

namespace {

struct RandomConfigs {
    std::mt19937_64 rng{20241122};

    template <typename T>
    T pick(std::initializer_list<T> values) {
        std::uniform_int_distribution<std::size_t> d(0, values.size() - 1);
        return *(values.begin() + d(rng));
    }

    TrialConfig next() {
        TrialConfig c;
        c.model = *find_model(pick<const char*>({"tiny", "small", "llama-7b", "llama-70b", "llama3-8b"}));
        c.optimizer =
            pick({Optimizer::adamw, Optimizer::lion, Optimizer::adam8bit, Optimizer::adafactor, Optimizer::lomo});
        c.precision = pick({Precision::fp32, Precision::bf16_mixed, Precision::fp16_mixed, Precision::bf16});
        c.zero_stage = pick({0u, 1u, 2u, 3u});
        c.world_size = pick({1u, 2u, 4u, 8u, 16u, 64u});
        c.micro_batch = pick({1u, 2u, 4u});
        c.context = pick({64u, 128u, 256u, 1024u, 4096u});
        c.grad_accum = pick({1u, 4u});
        c.checkpointing = pick({Checkpointing::none, Checkpointing::selective, Checkpointing::full});
        c.adam8bit_block = pick({256u, 2048u});
        return c;
    }
};

std::uint64_t states(const TrialConfig& c) {
    return model_states(flat_layout(c.model, c.adam8bit_block), StateSettings::of(c)).total();
}

const Hardware& device(int i) {
    static const Hardware cpu = *find_device("cpu"), h100 = *find_device("h100-80gb");
    return i % 2 ? cpu : h100;
}

// Whether a stage shards any model state of this optimizer and precision
// (Adafactor's statistics are replicated and LOMO has no gradients: in pure
// 16 bits at stage 1, or LOMO at stage 2, nothing is left to shard).
bool shards_something(const TrialConfig& c) {
    if (c.zero_stage >= 3 || has_master_weights(c.precision)) return true;
    const bool stateless = c.optimizer == Optimizer::adafactor || c.optimizer == Optimizer::lomo;
    if (c.zero_stage == 2) return c.optimizer != Optimizer::lomo || !stateless;
    return !stateless;
}

// Equal padded shards keep whole buffers N * shard long: up to N x 256 padding elements per buffer.
std::uint64_t padding_bound(const TrialConfig& c) {
    return 16 * (std::uint64_t{c.world_size} * flat_alignment(c.adam8bit_block)) * (c.model.layers + 1);
}

}  // namespace

TEST_CASE("more ranks never raise model states at ZeRO stages 1-3", "[estimate][memory][property]") {
    RandomConfigs random;
    const std::uint32_t sizes[] = {1, 2, 3, 4, 8, 16, 32, 64, 128, 256, 512, 1024};
    for (int i = 0; i < 2000; ++i) {
        TrialConfig c = random.next();
        c.zero_stage = 1 + i % 3;
        const bool real_model = c.model.hidden >= 4096;
        std::uint64_t previous = UINT64_MAX;
        for (std::uint32_t n : sizes) {
            c.world_size = n;
            const std::uint64_t now = states(c);
            INFO(summary(c) << " on " << c.model.name);
            // Real models up to 64 ranks: sharding saves more than padding costs. Beyond that, when
            // only the fp32 master is sharded, N x 256 padding per buffer can outgrow the saving.
            if (real_model && shards_something(c) && n <= 64) CHECK(now <= previous);
            // Always: never more than the padding the equal shards add.
            if (previous != UINT64_MAX) CHECK(now <= previous + padding_bound(c));
            previous = now;
        }
    }
}

TEST_CASE("without padding, model states follow the ZeRO formulas exactly as ranks grow", "[estimate][memory]") {
    // A buffer of 2^32 elements divides evenly for every N up to 1024 shards of 256: no padding.
    const BufferKind psi{std::uint64_t{1} << 32, 0, 0, 0, 1};
    for (std::uint64_t n = 1; n <= 1024; n *= 2) {
        const StateSettings s1{Optimizer::adamw, Precision::bf16_mixed, zero_plan(1), n, 256, 256};
        StateSettings s2 = s1, s3 = s1;
        s2.zero = zero_plan(2), s3.zero = zero_plan(3);
        const std::uint64_t psi_n = psi.numel;
        CHECK(model_states(psi, s1).total() == 4 * psi_n + 12 * psi_n / n);
        CHECK(model_states(psi, s2).total() == 2 * psi_n + 14 * psi_n / n);
        CHECK(model_states(psi, s3).total() == 16 * psi_n / n);
    }
}

TEST_CASE("checkpointing full <= selective-op <= none and full <= selective <= none, in every phase",
          "[estimate][memory][property]") {
    RandomConfigs random;
    for (int i = 0; i < 2000; ++i) {
        TrialConfig c = random.next();
        const Hardware& hw = device(i);
        auto memory = [&](Checkpointing mode) {
            c.checkpointing = mode;
            return step_memory(c.model, c, hw, {});
        };
        const StepMemory none = memory(Checkpointing::none), sel = memory(Checkpointing::selective),
                         full = memory(Checkpointing::full), op = memory(Checkpointing::selective_op);
        INFO(summary(c));
        for (Phase p : kPhases) {
            CHECK(full.at(p)[Component::activations] <= sel.at(p)[Component::activations]);
            CHECK(sel.at(p)[Component::activations] <= none.at(p)[Component::activations]);
            CHECK(full.at(p)[Component::activations] <= op.at(p)[Component::activations]);
            CHECK(op.at(p)[Component::activations] <= none.at(p)[Component::activations]);
        }
        CHECK(full.peak <= sel.peak);
        CHECK(sel.peak <= none.peak);
        CHECK(full.peak <= op.peak);
        CHECK(op.peak <= none.peak);
        if (c.model.layers > 1) CHECK(full.at(Phase::head_backward).total() < none.at(Phase::head_backward).total());
    }
}

TEST_CASE("a longer context never lowers activations or the peak", "[estimate][memory][property]") {
    RandomConfigs random;
    for (int i = 0; i < 2000; ++i) {
        TrialConfig c = random.next();
        const Hardware& hw = device(i);
        std::uint64_t previous_peak = 0;
        std::array<std::uint64_t, kPhaseCount> previous{};
        for (std::uint32_t s : {32u, 64u, 128u, 512u, 2048u, 8192u}) {
            c.context = s;
            const StepMemory m = step_memory(c.model, c, hw, {});
            INFO(summary(c));
            for (Phase p : kPhases) {
                CHECK(m.at(p)[Component::activations] >= previous[static_cast<std::size_t>(p)]);
                previous[static_cast<std::size_t>(p)] = m.at(p)[Component::activations];
            }
            CHECK(m.peak >= previous_peak);
            previous_peak = m.peak;
        }
    }
}

TEST_CASE("the peak is the largest phase and the breakdown sums to it", "[estimate][memory][property]") {
    RandomConfigs random;
    for (int i = 0; i < 500; ++i) {
        const TrialConfig c = random.next();
        const StepMemory m = step_memory(c.model, c, device(i), {});
        for (Phase p : kPhases) CHECK(m.at(p).total() <= m.peak);
        const MemoryBreakdown b = breakdown_at_peak(m);
        CHECK(b.total() == b.peak);
        CHECK(b.peak_phase == to_string(m.peak_phase));
    }
}

TEST_CASE("hand-derived: flash keeps the lse instead of P and needs a scratch linear in s",
          "[estimate][memory][flash]") {
    // The first case's configuration (tiny, AdamW fp32, b 2, s 64), flash.
    TrialConfig c = config_for("tiny", Attention::flash);
    c.optimizer = Optimizer::adamw;
    c.precision = Precision::fp32;
    c.micro_batch = 2;
    c.context = 64;
    c.checkpointing = Checkpointing::none;
    EstimateOptions o;
    o.cpu_threads = 1;
    const StepMemory m = step_memory(c.model, c, *find_device("cpu"), o);
    // Flash scratch, 1 thread: tiles 4 * (2*64*64 + 7*64*16 + 3*64) = 62208, independent of s,
    // and the backward's dK, dV accumulators 4 * 2*64*16 = 8192.
    CHECK(m.at_peak()[Component::workspace] == 70400);
    // K_none = 4*128*(6*64 + 2*32 + 3*176) + 2*512 + lse 4*2*4*64 (2048) = 502784 (eager: 631808).
    const ActivationSizes a = activation_sizes(c.model, c, *find_device("cpu"), o);
    CHECK(a.probs == 2048);
    CHECK(a.kept_none == 502784);
    // Selective frees nothing with flash.
    c.checkpointing = Checkpointing::selective;
    CHECK(activation_sizes(c.model, c, *find_device("cpu"), o).kept == 502784);
    // Selective-op keeps x (64), q, o (2*64), v (32) and g (176) per token and the lse:
    // 4*128*(64 + 128 + 32 + 176) + 2048 = 206848; it frees n1, x2, n2, k, u, m and both rstd.
    c.checkpointing = Checkpointing::selective_op;
    CHECK(activation_sizes(c.model, c, *find_device("cpu"), o).kept == 206848);
    // On CUDA, flash's workspace is cuDNN's in 16 bits: the backward's fp32 dQ accumulator
    // (4 x 32 heads x 8192 x 128) and the plan's bound (1 MiB + 8 bytes a query row), above cuBLASLt's 32 MiB.
    TrialConfig big = config_for("llama-7b", Attention::flash);
    big.precision = Precision::bf16_mixed;
    big.context = 8192;
    CHECK(step_memory(big.model, big, *find_device("h100-80gb"), {}).at_peak()[Component::workspace] ==
          4ull * 32 * 8192 * 128 + (1ull << 20) + 8ull * 32 * 8192);
    big.precision = Precision::fp32;  // cuDNN's graphs take 16 bits only: cuBLASLt's 32 MiB is the largest piece
    CHECK(step_memory(big.model, big, *find_device("h100-80gb"), {}).at_peak()[Component::workspace] == (32ull << 20));
}
