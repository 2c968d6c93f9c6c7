// The CUDA backend's GEMM plan cache, keying and eviction: plain C++, runs
// without a GPU.
#include <catch2/catch.hpp>

#include <memory>
#include <unordered_set>

#include "kernels/cuda/host/algo_cache.h"

using tune::kernels::DType;
using tune::kernels::GemmArgs;
using namespace tune::kernels::cuda;

namespace {

// A 256-byte aligned fake address plus `offset` bytes (never dereferenced).
void* addr(std::uintptr_t offset) { return reinterpret_cast<void*>(0x10000 + offset); }

GemmArgs base_args() {
    GemmArgs g;
    g.m = 128, g.n = 64, g.k = 32;
    g.lda = 32, g.ldb = 64, g.ldc = 64;
    g.a = addr(0), g.b = addr(0), g.c = addr(0);
    g.a_dtype = g.b_dtype = g.c_dtype = DType::bf16;
    return g;
}

// Counts destructions, as a plan releasing its descriptors would.
struct Entry {
    int id = 0;
    std::shared_ptr<int> destroyed;
    Entry(int i, std::shared_ptr<int> d) : id(i), destroyed(std::move(d)) {}
    Entry(Entry&& o) noexcept : id(o.id), destroyed(std::move(o.destroyed)) {}
    Entry& operator=(Entry&&) = delete;
    ~Entry() {
        if (destroyed) ++*destroyed;
    }
};

GemmKey key_m(std::int64_t m) {
    GemmArgs g = base_args();
    g.m = m;
    return make_gemm_key(g, 1 << 20);
}

}  // namespace

TEST_CASE("pointer_alignment reports the largest power of two up to 256") {
    CHECK(pointer_alignment(addr(0)) == 256);
    CHECK(pointer_alignment(addr(128)) == 128);
    CHECK(pointer_alignment(addr(2)) == 2);
    CHECK(pointer_alignment(addr(1)) == 1);
    CHECK(pointer_alignment(addr(4096 + 64)) == 64);
}

TEST_CASE("GEMM keys ignore pointers, alpha and beta but not alignment") {
    const GemmArgs g = base_args();
    const GemmKey k = make_gemm_key(g, 1 << 20);
    GemmArgs moved = g;
    moved.a = addr(512), moved.c = addr(1024), moved.alpha = 0.5f, moved.beta = 1.0f;
    CHECK(make_gemm_key(moved, 1 << 20) == k);
    CHECK(GemmKeyHash{}(make_gemm_key(moved, 1 << 20)) == GemmKeyHash{}(k));

    GemmArgs misaligned = g;
    misaligned.b = addr(2);  // a 16-bit operand one element off: other algorithms are valid
    CHECK(make_gemm_key(misaligned, 1 << 20) != k);
    CHECK(make_gemm_key(g, 1 << 21) != k);  // another workspace cap
}

TEST_CASE("every field that shapes the problem changes the key") {
    const GemmKey k = make_gemm_key(base_args(), 1 << 20);
    auto changed = [&](auto edit) {
        GemmArgs g = base_args();
        edit(g);
        return make_gemm_key(g, 1 << 20) != k;
    };
    CHECK(changed([](GemmArgs& g) { g.m = 129; }));
    CHECK(changed([](GemmArgs& g) { g.n = 65; }));
    CHECK(changed([](GemmArgs& g) { g.k = 33; }));
    CHECK(changed([](GemmArgs& g) { g.trans_a = true; }));
    CHECK(changed([](GemmArgs& g) { g.trans_b = true; }));
    CHECK(changed([](GemmArgs& g) { g.lda = 40; }));
    CHECK(changed([](GemmArgs& g) { g.ldc = 80; }));
    CHECK(changed([](GemmArgs& g) { g.c_dtype = DType::f32; }));
    CHECK(changed([](GemmArgs& g) { g.a_dtype = g.b_dtype = DType::f16; }));
    CHECK(changed([](GemmArgs& g) { g.batch = 2, g.stride_c = 128 * 64; }));
}

TEST_CASE("a batch of one ignores strides in the key") {
    GemmArgs g = base_args();
    g.stride_a = 12345, g.stride_b = 7, g.stride_c = 99;
    CHECK(make_gemm_key(g, 1 << 20) == make_gemm_key(base_args(), 1 << 20));
}

TEST_CASE("a strided batch promises only the alignment every batch matrix keeps") {
    // The emulated cuBLASLt refused the self-test's f16 batch of (20, 36)
    // matrices 1440 bytes apart, promised 256-byte alignment from the base.
    GemmArgs g = base_args();
    g.batch = 4;
    g.a_dtype = g.b_dtype = g.c_dtype = DType::f16;
    g.stride_a = 20 * 36, g.stride_b = 0, g.stride_c = 64 * 64;
    const GemmKey k = make_gemm_key(g, 1 << 20);
    CHECK(k.align_a == 32);                                          // 1440 = 32 * 45
    CHECK(k.align_b == 256);                                         // broadcast: one matrix, the pointer's alignment
    CHECK(k.align_c == 256);                                         // 8192 bytes apart
    CHECK(batch_alignment(addr(16), 1024, DType::f32, true) == 16);  // never above the pointer's own
    CHECK(batch_alignment(addr(0), 3, DType::bf16, false) == 256);   // a batch of one does not step
}

TEST_CASE("distinct shapes hash apart") {
    std::unordered_set<std::size_t> hashes;
    for (std::int64_t m = 1; m <= 1000; ++m) hashes.insert(GemmKeyHash{}(key_m(m)));
    CHECK(hashes.size() == 1000);
}

TEST_CASE("the cache finds what it stored and counts hits and misses") {
    auto destroyed = std::make_shared<int>(0);
    AlgoCache<Entry> cache(4);
    CHECK(cache.find(key_m(1)) == nullptr);
    cache.insert(key_m(1), Entry(1, destroyed));
    Entry* e = cache.find(key_m(1));
    REQUIRE(e != nullptr);
    CHECK(e->id == 1);
    CHECK(cache.stats().hits == 1);
    CHECK(cache.stats().misses == 1);
    CHECK(*destroyed == 0);
}

TEST_CASE("the least recently used plan is evicted and destroyed") {
    auto destroyed = std::make_shared<int>(0);
    AlgoCache<Entry> cache(3);
    for (int i = 1; i <= 3; ++i) cache.insert(key_m(i), Entry(i, destroyed));
    REQUIRE(cache.find(key_m(1)) != nullptr);  // 1 is now the most recently used; 2 the least
    cache.insert(key_m(4), Entry(4, destroyed));
    CHECK(cache.size() == 3);
    CHECK(cache.stats().evictions == 1);
    CHECK(*destroyed == 1);
    CHECK_FALSE(cache.contains(key_m(2)));
    CHECK(cache.contains(key_m(1)));
    CHECK(cache.contains(key_m(3)));
    CHECK(cache.contains(key_m(4)));
}

TEST_CASE("re-inserting a key replaces its plan without eviction") {
    auto destroyed = std::make_shared<int>(0);
    AlgoCache<Entry> cache(2);
    cache.insert(key_m(1), Entry(1, destroyed));
    cache.insert(key_m(2), Entry(2, destroyed));
    cache.insert(key_m(1), Entry(10, destroyed));
    CHECK(cache.size() == 2);
    CHECK(cache.stats().evictions == 0);
    CHECK(*destroyed == 1);  // the replaced plan
    REQUIRE(cache.find(key_m(1)) != nullptr);
    CHECK(cache.find(key_m(1))->id == 10);
    cache.clear();
    CHECK(*destroyed == 3);
}

TEST_CASE("keys print their shape for error messages") {
    GemmArgs g = base_args();
    g.trans_b = true;
    g.c_dtype = DType::f32;
    const std::string s = to_string(make_gemm_key(g, 1 << 20));
    CHECK(s.find("m=128 n=64 k=32") != std::string::npos);
    CHECK(s.find("NT") != std::string::npos);
    CHECK(s.find("bf16*bf16->f32") != std::string::npos);
}
