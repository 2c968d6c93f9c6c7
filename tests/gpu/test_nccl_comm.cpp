// NcclComm on one GPU rank (a real NCCL communicator of size 1; more ranks
// are `tune selftest --gpus N`): every collective leaves the buffer as it
// was and moves no bytes, device and host buffers alike; the ZeRO
// comparison of the multi-GPU self-test runs end to end on one rank.
// Skipped (exit 4) without a device, see gpu_main.cpp.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/math/half.h"
#include "train/comm/comm_error.h"
#include "train/comm/comm_nccl.h"
#include "train/selftest_training.h"

using namespace tune;
using namespace tune::train;
using kernels::DType;

namespace {

std::unique_ptr<Comm> one_rank(kernels::Backend& backend) {
    return make_nccl_comm(new_nccl_id(), 0, 1, NcclPlacement{0, &backend});
}

std::vector<float> ramp(std::size_t n) {
    std::vector<float> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = 0.5f * static_cast<float>(i) - 3.0f;
    return v;
}

}  // namespace

TEST_CASE("one-rank NCCL collectives on device buffers are the identity and move nothing") {
    auto backend = kernels::make_cuda_backend(0);
    auto comm = one_rank(*backend);
    CHECK(comm->rank() == 0);
    CHECK(comm->world_size() == 1);
    const std::vector<float> host = ramp(1024);
    void* d = backend->allocate(host.size() * 4);
    backend->copy_to_device(d, host.data(), host.size() * 4);
    const auto n = static_cast<std::int64_t>(host.size());
    comm->all_reduce(d, n, DType::f32, ReduceOp::sum);
    comm->all_reduce(d, n, DType::f32, ReduceOp::average);
    comm->reduce_scatter(d, n, DType::f32, ReduceOp::average);
    comm->all_gather(d, n, DType::f32);
    comm->broadcast(d, n, DType::f32, 0);
    comm->barrier();
    std::vector<float> back(host.size());
    backend->copy_to_host(back.data(), d, back.size() * 4);
    CHECK(back == host);
    CHECK(comm->bytes_moved() == 0);  // (n-1)/n of anything is nothing on one rank
    backend->deallocate(d, host.size() * 4);
}

TEST_CASE("one-rank NCCL collectives take 16-bit, i32 and host buffers and refuse bad requests with CommError") {
    auto backend = kernels::make_cuda_backend(0);
    auto comm = one_rank(*backend);
    std::vector<std::uint16_t> bf(256);
    for (std::size_t i = 0; i < bf.size(); ++i) bf[i] = math::to_bf16(static_cast<float>(i) / 8).bits;
    void* d = backend->allocate(bf.size() * 2);
    backend->copy_to_device(d, bf.data(), bf.size() * 2);
    comm->all_reduce(d, 256, DType::bf16, ReduceOp::average);
    comm->reduce_scatter(d, 256, DType::bf16, ReduceOp::sum);
    std::vector<std::uint16_t> back(bf.size());
    backend->copy_to_host(back.data(), d, back.size() * 2);
    CHECK(back == bf);
    backend->deallocate(d, bf.size() * 2);

    // Host memory (a rank's result summary) is staged through the device.
    std::vector<std::int32_t> counts{1, 2, 3, 4};
    comm->all_reduce(counts.data(), 4, DType::i32, ReduceOp::sum);
    comm->all_gather(counts.data(), 4, DType::i32);
    CHECK(counts == std::vector<std::int32_t>{1, 2, 3, 4});
    std::vector<std::uint8_t> bytes{9, 8, 7};
    comm->broadcast(bytes.data(), 3, DType::u8, 0);
    CHECK(bytes == std::vector<std::uint8_t>{9, 8, 7});

    CHECK_THROWS_AS(comm->all_reduce(bytes.data(), 3, DType::u8, ReduceOp::sum), CommError);
    CHECK_THROWS_AS(comm->all_reduce(counts.data(), 4, DType::i32, ReduceOp::average), CommError);
    CHECK_THROWS_WITH(comm->broadcast(bytes.data(), 3, DType::u8, 1), Catch::Contains("root 1 is not a rank"));
    CHECK(comm->bytes_moved() == 0);
}

TEST_CASE("an NCCL comm without a backend binds the local rank's device and runs synchronously") {
    auto comm = make_nccl_comm(new_nccl_id(), 0, 1, NcclPlacement{0, nullptr});
    std::vector<float> host = ramp(64);
    comm->all_reduce(host.data(), 64, DType::f32, ReduceOp::sum);
    CHECK(host == ramp(64));
    comm->barrier();
}

TEST_CASE("the --gpus comparison on one GPU rank: every ZeRO stage agrees with the CPU") {
    auto backend = kernels::make_cuda_backend(0);
    auto comm = one_rank(*backend);
    const auto rows = zero_stages_against_cpu(*backend, *comm);
    REQUIRE(rows.size() == 4);
    for (const auto& r : rows) {
        INFO("stage " << r.stage << ": params " << r.param_diff << " (tol " << r.param_tolerance << "), losses "
                      << r.loss_diff << " (tol " << r.loss_tolerance << "), moved " << r.moved << " " << r.error);
        CHECK(r.pass);
    }
}
