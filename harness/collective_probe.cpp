#include "harness/collective_probe.h"

#include <algorithm>
#include <chrono>

namespace tune::harness {
namespace {

using Clock = std::chrono::steady_clock;

void call(Comm& comm, Collective op, void* buf, std::int64_t count) {
    switch (op) {
        case Collective::all_reduce: comm.all_reduce(buf, count, kernels::DType::f32, ReduceOp::sum); return;
        case Collective::reduce_scatter: comm.reduce_scatter(buf, count, kernels::DType::f32, ReduceOp::sum); return;
        case Collective::all_gather: comm.all_gather(buf, count, kernels::DType::f32); return;
    }
}

// Seconds of `calls` back-to-back calls, as rank 0 saw them, on every rank.
double timed_batch(Comm& comm, kernels::Backend& backend, Collective op, void* buf, std::int64_t count,
                   std::size_t calls) {
    comm.barrier();
    const auto start = Clock::now();
    for (std::size_t i = 0; i < calls; ++i) call(comm, op, buf, count);
    backend.synchronize();
    float elapsed = std::chrono::duration<float>(Clock::now() - start).count();
    comm.broadcast(&elapsed, 1, kernels::DType::f32, 0);
    return elapsed;
}

}  // namespace

std::vector<CollectiveTiming> time_collectives(Comm& comm, kernels::Backend& backend,
                                               const std::vector<CollectiveRate>& plan, double min_seconds) {
    const auto n = static_cast<std::uint32_t>(comm.world_size());
    std::vector<CollectiveTiming> out;
    for (const CollectiveRate& want : plan) {
        // count: fp32 elements, a multiple of the rank count (shards are equal parts).
        const std::uint64_t per_rank = std::max<std::uint64_t>(1, (want.bytes / 4 + n - 1) / n);
        const auto count = static_cast<std::int64_t>(per_rank * n);
        const std::uint64_t bytes = static_cast<std::uint64_t>(count) * 4;
        void* buf = backend.allocate(bytes);
        backend.fill_zero(buf, bytes);
        const auto begin = Clock::now();
        timed_batch(comm, backend, want.op, buf, count, 1);  // untimed: connections, first-touch pages
        std::size_t calls = 1;
        double elapsed = timed_batch(comm, backend, want.op, buf, count, calls);
        while (elapsed < min_seconds && calls < (std::size_t{1} << 20)) {
            calls *= 2;
            elapsed = timed_batch(comm, backend, want.op, buf, count, calls);
        }
        backend.deallocate(buf, bytes);
        CollectiveTiming t;
        t.rate = want;
        t.rate.ranks = n;
        t.rate.bus_bytes_per_s =
            bus_bandwidth(want.op, n, static_cast<double>(bytes), elapsed / static_cast<double>(calls));
        t.seconds = std::chrono::duration<double>(Clock::now() - begin).count();
        out.push_back(t);
    }
    return out;
}

}  // namespace tune::harness
