#include "train/comm/collective_probe.h"

#include <algorithm>
#include <chrono>

namespace tune::train {
namespace {

using Clock = std::chrono::steady_clock;

// As the trainer calls it on gradients (train/trainer.cpp): in their dtype, reductions averaging.
void call(Comm& comm, const CollectiveRate& rate, void* buf, std::int64_t count) {
    const kernels::DType dtype = kernel_dtype(rate.dtype);
    switch (rate.op) {
        case Collective::all_reduce:
            comm.all_reduce(buf, count, dtype, ReduceOp::average);
            return;
        case Collective::reduce_scatter:
            comm.reduce_scatter(buf, count, dtype, ReduceOp::average);
            return;
        case Collective::all_gather:
            comm.all_gather(buf, count, dtype);
            return;
    }
}

struct Batch {
    double timed = 0;  // seconds in the calls
    double wall = 0;   // seconds of the whole batch, before_each_call included
};

// `calls` calls, each after `before` (untimed) if given, as rank 0 saw them, on every rank.
Batch timed_batch(Comm& comm, kernels::Backend& backend, const CollectiveRate& rate, void* buf, std::int64_t count,
                  std::size_t calls, const std::function<void()>& before) {
    comm.barrier();
    const auto begin = Clock::now();
    float seconds[2] = {0, 0};  // timed, wall
    for (std::size_t i = 0; i < calls; ++i) {
        if (before) {
            before();
            backend.synchronize();
        }
        const auto start = Clock::now();
        call(comm, rate, buf, count);
        backend.synchronize();
        seconds[0] += std::chrono::duration<float>(Clock::now() - start).count();
    }
    seconds[1] = std::chrono::duration<float>(Clock::now() - begin).count();
    comm.broadcast(seconds, 2, kernels::DType::f32, 0);
    return {seconds[0], seconds[1]};
}

}  // namespace

std::vector<CollectiveTiming> time_collectives(Comm& comm, kernels::Backend& backend,
                                               const std::vector<CollectiveRate>& plan, double min_seconds,
                                               const std::function<void()>& before_each_call) {
    const auto n = static_cast<std::uint32_t>(comm.world_size());
    std::vector<CollectiveTiming> out;
    for (const CollectiveRate& want : plan) {
        // count: elements of the dtype, a multiple of the rank count (shards are equal parts).
        const std::uint64_t element = probe_dtype_bytes(want.dtype);
        const std::uint64_t per_rank = std::max<std::uint64_t>(1, (want.bytes / element + n - 1) / n);
        const auto count = static_cast<std::int64_t>(per_rank * n);
        const std::uint64_t bytes = static_cast<std::uint64_t>(count) * element;
        void* buf = backend.allocate(bytes);
        backend.fill_zero(buf, bytes);
        const auto begin = Clock::now();
        timed_batch(comm, backend, want, buf, count, 1, before_each_call);  // untimed: connections, first-touch pages
        std::size_t calls = 1;
        Batch batch = timed_batch(comm, backend, want, buf, count, calls, before_each_call);
        while (batch.wall < min_seconds && calls < (std::size_t{1} << 20)) {
            calls *= 2;
            batch = timed_batch(comm, backend, want, buf, count, calls, before_each_call);
        }
        const double elapsed = batch.timed;
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

}  // namespace tune::train
