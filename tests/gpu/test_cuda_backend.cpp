// The CUDA backend on a real device: the full self-test against the CPU,
// out-of-memory recovery, errors recorded by kernels, memory statistics,
// event timing. Runs only where a device exists (see gpu_main.cpp).
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/error.h"
#include "kernels/selftest/selftest.h"
#include "tests/gpu/device_pages_case.h"

using namespace tune::kernels;

TEST_CASE("every self-test case agrees with the CPU backend") {
    CpuBackend reference;
    auto cuda = make_cuda_backend(0);
    for (const auto& c : selftest::standard_cases()) {
        const auto r = selftest::run_case(c, reference, *cuda, 11);
        INFO(c.op << " " << c.dtype << " " << c.shape << ": " << r.message);
        if (const auto* w = r.worst()) INFO(w->name << " nmse " << w->stats.nmse << " max " << w->stats.max_abs);
        CHECK(r.status == selftest::Status::pass);
    }
    CHECK(cuda->live_bytes() == 0);
}

TEST_CASE("an allocation larger than the device raises OutOfMemoryError and the backend keeps working") {
    auto cuda = make_cuda_backend(0);
    const auto stats = cuda_memory_stats(*cuda);
    REQUIRE(stats.has_value());
    CHECK_THROWS_AS(cuda->allocate(stats->total_bytes * 2), tune::OutOfMemoryError);
    void* p = cuda->allocate(1 << 20);
    CHECK(p != nullptr);
    cuda->fill_zero(p, 1 << 20);
    cuda->synchronize();
    cuda->deallocate(p, 1 << 20);
    CHECK(cuda->live_bytes() == 0);
}

TEST_CASE("a token outside the vocabulary is reported at the next synchronisation") {
    auto cuda = make_cuda_backend(0);
    const std::int32_t tokens[2] = {1, 99};
    auto* t = static_cast<std::int32_t*>(cuda->allocate(sizeof tokens));
    void* table = cuda->allocate(4 * 4 * 8);
    void* out = cuda->allocate(2 * 8 * 4);
    cuda->copy_to_device(t, tokens, sizeof tokens);
    cuda->embedding_forward(out, t, table, 2, 8, 4, DType::f32, {});
    CHECK_THROWS_WITH(cuda->synchronize(), Catch::Contains("token 99 at 1"));
    cuda->synchronize();  // reported once; the backend goes on
    cuda->deallocate(t, sizeof tokens);
    cuda->deallocate(table, 4 * 4 * 8);
    cuda->deallocate(out, 2 * 8 * 4);
}

TEST_CASE("memory statistics see the context and the pool's high-water mark") {
    auto cuda = make_cuda_backend(0);
    void* p = cuda->allocate(64 << 20);
    cuda->deallocate(p, 64 << 20);
    cuda->synchronize();
    const auto s = cuda_memory_stats(*cuda);
    REQUIRE(s.has_value());
    CHECK(s->context_bytes > 0);
    CHECK(s->pool_reserved_high_bytes >= (64u << 20));
    CHECK(s->pool_used_high_bytes >= (64u << 20));
    CHECK(cuda_device_used_bytes(0) > 0);
}

TEST_CASE(
    "device pages are backed, moved with their contents and released, what the device cannot hold backs nothing") {
    tune::test::check_device_pages();
}

TEST_CASE("an event timer measures work on the backend's stream") {
    auto cuda = make_cuda_backend(0);
    auto timer = make_cuda_timer(*cuda);
    void* p = cuda->allocate(256 << 20);
    timer->start();
    cuda->fill_zero(p, 256 << 20);
    timer->stop();
    CHECK(timer->seconds() > 0.0);
    cuda->deallocate(p, 256 << 20);
}
