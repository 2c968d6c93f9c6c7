// A single rank has no peer: every point-to-point transfer is refused with the words the multi-rank
// communicators use (train/comm/comm_rules.h), and an empty batch is nothing to do.
#include <catch2/catch.hpp>

#include "train/comm/comm.h"
#include "train/comm/comm_error.h"

using namespace tune::train;
using tune::kernels::DType;

TEST_CASE("a single rank refuses point-to-point transfers, since its only rank is itself") {
    SingleRankComm comm;
    float x = 1;
    CHECK_THROWS_WITH(comm.send(&x, 1, DType::f32, 0),
                      "send: rank 0 of 1: peer 0 is this rank; a rank keeps its own data");
    CHECK_THROWS_WITH(comm.recv(&x, 1, DType::f32, 1), "recv: rank 0 of 1: peer 1 is not a rank");
    CHECK_NOTHROW(comm.send_recv({}));
    CHECK(comm.bytes_moved() == 0);
}
