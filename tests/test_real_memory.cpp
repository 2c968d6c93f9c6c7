// What the machine saw a trial use: /proc parsing, the untracked arithmetic
// (the GPU's too: it is the same, over cudaMemGetInfo), the watch that takes
// the baseline and samples the level, and the allocator's host pages, which
// leave the resident set the moment they are freed.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "tests/support/trainer_fixture.h"
#include "train/memory/host_memory.h"
#include "train/memory/memory.h"
#include "train/memory/real_memory.h"

using namespace tune;
using namespace tune::train;

TEST_CASE("VmRSS and VmHWM are read from /proc/<pid>/status's text in bytes", "[memory]") {
    const char* status = "Name:\ttune\nVmPeak:\t  900 kB\nVmHWM:\t    5000 kB\nVmRSS:\t    4000 kB\nRssAnon:\t 10 kB\n";
    const auto m = process_memory(status);
    REQUIRE(m);
    CHECK(m->rss == 4000 * 1024);
    CHECK(m->hwm == 5000 * 1024);
    CHECK_FALSE(process_memory("VmRSS:\t 10 kB\n"));            // no VmHWM
    CHECK_FALSE(proc_kib_field("XVmRSS:\t 10 kB\n", "VmRSS"));  // a key only starts a line
    CHECK(proc_kib_field("A: 1 kB\nVmRSS:\t 10 kB\n", "VmRSS") == 10240);
}

TEST_CASE("this process's resident set is readable and the peak restarts", "[memory]") {
    const auto m = this_process_memory();
    REQUIRE(m);
    CHECK(m->rss > 0);
    CHECK(m->hwm >= m->rss);
}

TEST_CASE("untracked is the real peak less the baseline and the tagged peak, signed", "[memory]") {
    const RealMemory r = real_memory(200, 1300, 1000);
    CHECK(r.real_peak == 1300);
    CHECK(r.baseline == 200);
    CHECK(r.untracked == 100);
    // Tagged pages never touched are not resident: negative, not a wrapped 2^64.
    CHECK(real_memory(200, 1000, 1000).untracked == -200);
    // A GPU's numbers: 80 GiB used at most, 1.5 GiB context before the model, 77 GiB tagged.
    constexpr std::uint64_t GiB = std::uint64_t{1} << 30;
    CHECK(real_memory(3 * GiB / 2, 80 * GiB, 77 * GiB).untracked == static_cast<std::int64_t>(3 * GiB / 2));
    CHECK(real_memory(0, std::numeric_limits<std::uint64_t>::max(), 0).untracked ==
          std::numeric_limits<std::int64_t>::max());
}

TEST_CASE("the watch takes the baseline first and keeps the most it sampled", "[memory]") {
    std::atomic<std::uint64_t> level{100};
    MemoryProbe probe;
    probe.level = [&] { return std::optional<std::uint64_t>(level.load()); };
    MemoryWatch watch(probe, 1);
    CHECK(watch.baseline() == 100);
    level = 900;
    level = 400;  // a spike the sampler may miss; finish() samples once more at the end
    const RealMemory r = watch.finish(250);
    CHECK(r.baseline == 100);
    CHECK(r.real_peak >= 400);
    CHECK(r.untracked == static_cast<std::int64_t>(r.real_peak) - 350);
}

TEST_CASE("a kernel high-water mark counts only when it restarted at the baseline", "[memory]") {
    MemoryProbe probe;
    probe.level = [] { return std::optional<std::uint64_t>(100); };
    probe.high_water = [] { return std::optional<std::uint64_t>(5000); };
    SECTION("restarted") {
        probe.restart_high_water = [] { return true; };
        CHECK(MemoryWatch(probe, 1).finish(0).real_peak == 5000);
    }
    SECTION("refused: it may hold a peak from before the baseline") {
        probe.restart_high_water = [] { return false; };
        CHECK(MemoryWatch(probe, 1).finish(0).real_peak == 100);
    }
}

TEST_CASE("the resident set follows the tagged peak: kept pages give way to growth", "[memory]") {
    kernels::CpuBackend backend({1, 0});
    Allocator memory(backend, 0);
    constexpr std::uint64_t MiB = 1ull << 20;
    const auto rss = [] { return this_process_memory().value().rss; };
    const auto touched = [&](Buffer b) {
        std::memset(b.get(), 1, b.bytes());
        return b;
    };
    // Through malloc, freeing the first buffer raised glibc's mmap threshold
    // above 8 MiB; the next came from its heap and stayed resident after it
    // was freed, above any tagged peak.
    const std::uint64_t start = rss();
    {
        Buffer a = touched(memory.allocate(Component::activations, 8 * MiB));
        Buffer b = touched(memory.allocate(Component::activations, 8 * MiB));
        CHECK(reinterpret_cast<std::uintptr_t>(b.get()) % 256 == 0);
    }
    // Both are kept (the peak is 16 MiB); a 24 MiB request takes both blocks'
    // pages and faults in only the 8 MiB they lack (growing one and handing
    // the other back faulted in 16), and the process holds the new peak.
    CHECK(memory.kept() == 16 * MiB);
    Buffer large = touched(memory.allocate(Component::activations, 24 * MiB));
    CHECK(memory.kept() == 0);
    CHECK(memory.mapped() == 24 * MiB);
    CHECK(rss() >= start + 22 * MiB);
    CHECK(rss() < start + 26 * MiB);
    large.reset();
    CHECK(memory.live() == 0);
}

TEST_CASE("a GEMM over many rows keeps little memory outside the allocator", "[memory][gemm]") {
    // The LM head's dW shape, dW (V, C) += dlogits^T (V, r) x (r, C). Handed whole
    // to OpenBLAS (C >= 512 columns) it packed about V x r floats, 16 MiB here,
    // into its own buffer, which stayed resident and which no tag counts.
    constexpr std::int64_t V = 16384, C = 512, r = 256;
    std::vector<float> dlogits(static_cast<std::size_t>(r * V), 0.5f), x(static_cast<std::size_t>(r * C), 0.25f);
    std::vector<float> dweight(static_cast<std::size_t>(V * C), 1.0f);
    kernels::CpuBackend backend({2, 0});
    kernels::GemmArgs g{.m = V,
                        .n = C,
                        .k = r,
                        .trans_a = true,
                        .a = dlogits.data(),
                        .lda = V,
                        .b = x.data(),
                        .ldb = C,
                        .c = dweight.data(),
                        .ldc = C,
                        .beta = 1.0f};
    const std::uint64_t before = this_process_memory().value().rss;
    backend.gemm(g, {});
    const std::uint64_t after = this_process_memory().value().rss;
    CHECK(dweight.front() == Approx(1.0f + r * 0.5f * 0.25f));
    CHECK(dweight.back() == Approx(1.0f + r * 0.5f * 0.25f));
    CHECK(after - std::min(before, after) < (8ull << 20));
}

TEST_CASE("weights drawn in chunks on upload equal the whole host init, every precision", "[memory][trainer]") {
    for (Precision p : {Precision::fp32, Precision::bf16_mixed}) {
        const TrialConfig c = test::trainer_config(test::micro_model(), Optimizer::adamw, p);
        const ParamLayout layout = make_param_layout(c.model, c.world_size, c.adam8bit_block);
        const HostParams whole = random_init(layout, c.seed);
        test::TrainerRig chunked(c, train::synthetic_tokens(c.seed, c.model.vocab));
        test::TrainerRig reference(c, train::synthetic_tokens(c.seed, c.model.vocab), &whole);
        CHECK(chunked.trainer->model().download_weights() == reference.trainer->model().download_weights());
    }
}
