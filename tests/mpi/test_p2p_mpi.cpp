// Point-to-point on MpiComm under mpirun (2 and 4 ranks): a ring exchange in
// both directions batched so that every rank sends before it receives, a
// blocking pair between the first and last rank in fp32 and bf16, the bytes
// each rank counts, and the peers it refuses. Every rank posts the same
// transfers whatever the checks say, so a failed CHECK leaves no rank waiting.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "kernels/math/half.h"
#include "tests/mpi/mpi_session.h"
#include "train/comm/comm_error.h"
#include "train/comm/comm_mpi.h"

namespace {

using tune::kernels::DType;
using tune::train::CommError;
using tune::train::MpiComm;
using tune::train::P2POp;
namespace math = tune::math;

// Rank r's element i: exact in fp32 and bf16.
float value(int rank, std::int64_t i) { return static_cast<float>(rank + 1) * 4.0f + 0.5f * static_cast<float>(i % 8); }

std::vector<float> values_of(int rank, std::int64_t count) {
    std::vector<float> v(static_cast<std::size_t>(count));
    for (std::int64_t i = 0; i < count; ++i) v[static_cast<std::size_t>(i)] = value(rank, i);
    return v;
}

}  // namespace

TEST_CASE("mpi p2p: a batched ring passes each rank's buffer to the next and the previous at once", "[mpi][comm]") {
    MpiComm comm(tune::test::mpi_runtime());
    const int n = comm.world_size(), me = comm.rank();
    const int next = (me + 1) % n, previous = (me + n - 1) % n;
    constexpr std::int64_t kCount = 300;
    const std::vector<float> mine = values_of(me, kCount);
    std::vector<float> from_previous(kCount, -1.0f), from_next(kCount, -1.0f);
    // The sends come first in every rank's batch: unbatched, blocking sends would wait on one another.
    const P2POp ring[] = {{P2POp::Kind::send, const_cast<float*>(mine.data()), kCount, DType::f32, next},
                          {P2POp::Kind::send, const_cast<float*>(mine.data()), kCount, DType::f32, previous},
                          {P2POp::Kind::recv, from_previous.data(), kCount, DType::f32, previous},
                          {P2POp::Kind::recv, from_next.data(), kCount, DType::f32, next}};
    comm.send_recv(ring);
    CHECK(from_previous == values_of(previous, kCount));
    CHECK(from_next == values_of(next, kCount));
    CHECK(comm.bytes_moved() == 2 * kCount * sizeof(float));
}

TEST_CASE("mpi p2p: blocking send and recv between the first and last rank keep their order, fp32 and bf16",
          "[mpi][comm]") {
    MpiComm comm(tune::test::mpi_runtime());
    const int n = comm.world_size(), me = comm.rank(), last = n - 1;
    constexpr std::int64_t kCount = 40;
    std::vector<float> a = values_of(0, kCount), b = values_of(1, kCount);
    std::vector<std::uint16_t> half;
    for (float x : values_of(2, kCount)) half.push_back(math::to_bf16(x).bits);
    if (me == 0) {
        comm.send(a.data(), kCount, DType::f32, last);
        comm.send(b.data(), kCount, DType::f32, last);
        comm.send(half.data(), kCount, DType::bf16, last);
        CHECK(comm.bytes_moved() == 2 * kCount * sizeof(float) + kCount * sizeof(std::uint16_t));
    } else if (me == last) {
        std::vector<float> first(kCount), second(kCount);
        std::vector<std::uint16_t> third(kCount);
        comm.recv(first.data(), kCount, DType::f32, 0);
        comm.recv(second.data(), kCount, DType::f32, 0);
        comm.recv(third.data(), kCount, DType::bf16, 0);
        CHECK(first == a);
        CHECK(second == b);
        for (std::int64_t i = 0; i < kCount; ++i)
            CHECK(math::to_float(math::bf16{third[static_cast<std::size_t>(i)]}) == value(2, i));
        CHECK(comm.bytes_moved() == 0);  // receiving sends nothing
    }
    comm.barrier();
}

TEST_CASE("mpi p2p: a peer outside the ranks, this rank itself or a negative count is refused, naming it",
          "[mpi][comm]") {
    MpiComm comm(tune::test::mpi_runtime());
    const int n = comm.world_size(), me = comm.rank();
    float x = 0;
    CHECK_THROWS_WITH(comm.send(&x, 1, DType::f32, n), Catch::Contains("peer " + std::to_string(n) + " is not a rank"));
    CHECK_THROWS_AS(comm.recv(&x, 1, DType::f32, -1), CommError);
    CHECK_THROWS_WITH(comm.send(&x, 1, DType::f32, me), Catch::Contains("is this rank"));
    CHECK_THROWS_WITH(comm.recv(&x, -1, DType::f32, (me + 1) % n), Catch::Contains("negative count"));
    CHECK(comm.bytes_moved() == 0);
}
