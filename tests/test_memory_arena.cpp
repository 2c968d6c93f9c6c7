// A recorded graph's buffers at planned offsets (train/memory/arena.h), and
// the ledger's trace that plans them and counts a replay (Allocator::count).
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <utility>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "train/memory/arena.h"
#include "train/memory/memory.h"

using namespace tune;

namespace {

// A trace of buffers allocated and freed in the order given: +n allocates buffer n, -n frees it.
train::LedgerTrace trace_of(const std::vector<std::pair<int, std::uint64_t>>& steps) {
    train::LedgerTrace t;
    for (const auto& [id, bytes] : steps) {
        const auto* ptr = reinterpret_cast<const void*>(static_cast<std::uintptr_t>(std::abs(id)) * 4096);
        t.push_back({id > 0 ? train::LedgerEvent::Kind::allocate : train::LedgerEvent::Kind::release,
                     Component::activations,
                     bytes,
                     ptr,
                     {}});
    }
    return t;
}

}  // namespace

TEST_CASE("the arena plan places the largest buffers first, each at the lowest offset free for its lifetime",
          "[memory]") {
    // A kept tensor between two transients: placed in allocation order, the second transient (larger than the
    // first's hole) would go above the kept one; largest first, the kept one goes above both transients.
    const train::LedgerTrace t =
        trace_of({{1, 1000}, {2, 300}, {-1, 1000}, {3, 1200}, {-3, 1200}, {-2, 300}, {4, 100}, {-4, 100}});
    const train::ArenaPlan plan = train::plan_arena(t);
    REQUIRE(plan.offsets.size() == 4);
    CHECK(plan.bytes == std::vector<std::uint64_t>{1000, 300, 1200, 100});
    CHECK(plan.offsets[2] == 0);     // 1280 bytes rounded, first
    CHECK(plan.offsets[0] == 0);     // alive apart from buffer 3: the same place
    CHECK(plan.offsets[1] == 1280);  // beside both
    CHECK(plan.offsets[3] == 0);
    CHECK(plan.extent == 1280 + 512);
    // Best fit in allocation order needs 1024 + 512 + 1280: the micro-batch's peak here is 1200 + 300.
}

TEST_CASE("an arena takes its plan's places in order and refuses a run that differs from it", "[memory]") {
    const train::ArenaPlan plan = train::plan_arena(trace_of({{1, 512}, {2, 256}, {-1, 512}, {-2, 256}}));
    std::vector<unsigned char> storage(plan.extent);
    {
        train::Arena a(storage.data(), plan);
        void* first = a.take(512);
        void* second = a.take(256);
        CHECK(first != second);
        CHECK(a.holds(first));
        CHECK_FALSE(a.holds(storage.data() + plan.extent));
        CHECK_THROWS_WITH(a.take(256), Catch::Contains("no more requests"));
    }
    train::Arena wrong_size(storage.data(), plan);
    CHECK_THROWS_WITH(wrong_size.take(513), Catch::Contains("differ from the run it was planned on"));
    // Planned apart in time, two buffers may share a place: alive together, the second is refused.
    const train::ArenaPlan apart = train::plan_arena(trace_of({{1, 512}, {-1, 512}, {2, 512}, {-2, 512}}));
    REQUIRE(apart.offsets[0] == apart.offsets[1]);
    std::vector<unsigned char> small(apart.extent);
    train::Arena together(small.data(), apart);
    together.take(512);
    CHECK_THROWS_WITH(together.take(512), Catch::Contains("still alive"));
}

TEST_CASE("a ledger trace plans an arena and counts a replay as the recorded run was counted", "[memory]") {
    kernels::CpuBackend backend({1, 0});
    train::Allocator recorded(backend, 0), replayed(backend, 0);
    train::Buffer states = recorded.allocate(Component::params, 4096);
    train::Buffer same = replayed.allocate(Component::params, 4096);
    recorded.start_trace();
    {
        recorded.set_phase("forward");
        train::Buffer x = recorded.allocate(Component::activations, 1000);
        train::Buffer y = recorded.allocate(Component::activations, 3000);
        x.reset();
        recorded.set_phase("head-backward");
        train::Buffer logits = recorded.allocate(Component::logits, 900);  // in x's place
        y.reset();
        train::Buffer dx = recorded.allocate(Component::activations, 2000);
    }
    const train::LedgerTrace trace = recorded.end_trace();
    CHECK(trace.size() == 10);  // 2 phases, 4 allocations, 4 frees
    // 1024 + 3072 live at once; logits (1024) and dx (2048) fit beside each other after.
    CHECK(train::plan_arena(trace).extent == 4096);

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
    train::Allocator memory(backend, 0);
    const train::ArenaPlan plan = train::plan_arena(trace_of({{1, 1000}, {2, 2000}, {-2, 2000}, {-1, 1000}}));
    std::vector<unsigned char> storage(plan.extent);
    train::Arena arena(storage.data(), plan);
    const std::uint64_t before = backend.live_bytes();
    memory.place_in(&arena);
    {
        train::Buffer a = memory.allocate(Component::activations, 1000);
        train::Buffer b = memory.allocate(Component::activations, 2000);
        CHECK(arena.holds(a.get()));
        CHECK(b.get() == storage.data());  // the larger, placed first
        CHECK(memory.live() == 3000);
        CHECK(backend.live_bytes() == before);
    }
    memory.place_in(nullptr);
    CHECK(memory.live() == 0);
    CHECK_FALSE(arena.holds(memory.allocate(Component::activations, 10).get()));
}
