// A recorded graph's buffers at fixed offsets (harness/memory/arena.h), and
// the ledger's trace that plans them and counts a replay (Allocator::count).
#include <catch2/catch.hpp>

#include <cstdint>
#include <stdexcept>
#include <vector>

#include "harness/memory/arena.h"
#include "harness/memory/memory.h"
#include "kernels/cpu/cpu_backend.h"

using namespace tune;
using harness::Arena;

TEST_CASE("the arena places by best fit over the freed ranges, joined, and rounds to 256 bytes", "[memory]") {
    Arena a;
    CHECK(a.take(100) == 0);
    CHECK(a.take(1000) == 256);  // 1024 bytes
    CHECK(a.take(300) == 1280);  // 512 bytes
    CHECK(a.take(256) == 1792);
    a.give(256, 1000);           // [256, 1280) free
    a.give(1792, 256);           // [1792, 2048) free, at the end
    CHECK(a.take(200) == 1792);  // the smaller range that holds it
    CHECK(a.take(700) == 256);   // then the larger one, split
    CHECK(a.take(256) == 1024);  // its rest
    CHECK(a.extent() == 2048);
    a.give(1280, 300);
    a.give(1792, 200);            // [1280, 2048) free, joined: it reaches the end
    CHECK(a.take(4096) == 1280);  // grows from inside it
    CHECK(a.extent() == 1280 + 4096);
}

TEST_CASE("a bound arena refuses what passes its bytes, naming the plan", "[memory]") {
    std::vector<unsigned char> storage(1024);
    Arena a(storage.data(), storage.size());
    CHECK(a.at(a.take(512)) == storage.data());
    CHECK(a.holds(storage.data() + 1023));
    CHECK_FALSE(a.holds(storage.data() + 1024));
    CHECK_THROWS_WITH(a.take(513), Catch::Contains("differ from the run it was planned on"));
}

TEST_CASE("a ledger trace plans an arena and counts a replay as the recorded run was counted", "[memory]") {
    kernels::CpuBackend backend({1, 0});
    harness::Allocator recorded(backend, 0), replayed(backend, 0);
    harness::Buffer states = recorded.allocate(Component::params, 4096);
    harness::Buffer same = replayed.allocate(Component::params, 4096);
    recorded.start_trace();
    {
        recorded.set_phase("forward");
        harness::Buffer x = recorded.allocate(Component::activations, 1000);
        harness::Buffer y = recorded.allocate(Component::activations, 3000);
        x.reset();
        recorded.set_phase("head-backward");
        harness::Buffer logits = recorded.allocate(Component::logits, 900);  // in x's place
        y.reset();
        harness::Buffer dx = recorded.allocate(Component::activations, 2000);
    }
    const harness::LedgerTrace trace = recorded.end_trace();
    CHECK(trace.size() == 10);  // 2 phases, 4 allocations, 4 frees
    // 1024 + 3072 live at once, then 1024 (logits) + 3072 freed + the 2048 dx fits y's place.
    CHECK(harness::arena_bytes(trace) == 4096);

    replayed.count(trace);
    CHECK(replayed.live() == recorded.live());
    CHECK(replayed.peak() == recorded.peak());
    CHECK(replayed.peak_breakdown().peak_phase == "forward");
    CHECK(replayed.peak_breakdown().bytes == recorded.peak_breakdown().bytes);
    CHECK(replayed.tag_peak(Component::activations) == recorded.tag_peak(Component::activations));
    CHECK(replayed.tag_peak(Component::logits) == 900);
    CHECK(replayed.phase() == "head-backward");
    CHECK(backend.live_bytes() == 2 * 4096);  // counting touched no memory
}

TEST_CASE("an allocator placing in an arena asks the backend for nothing", "[memory]") {
    kernels::CpuBackend backend({1, 0});
    harness::Allocator memory(backend, 0);
    std::vector<unsigned char> storage(4096);
    Arena arena(storage.data(), storage.size());
    const std::uint64_t before = backend.live_bytes();
    memory.place_in(&arena);
    {
        harness::Buffer a = memory.allocate(Component::activations, 1000);
        harness::Buffer b = memory.allocate(Component::activations, 2000);
        CHECK(a.get() == storage.data());
        CHECK(b.get() == storage.data() + 1024);
        CHECK(memory.live() == 3000);
        CHECK(backend.live_bytes() == before);
    }
    memory.place_in(nullptr);
    CHECK(memory.live() == 0);
    CHECK(memory.allocate(Component::activations, 10).get() != storage.data());
}
