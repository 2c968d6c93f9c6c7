// `tune devices` names the driver branch the build's CUDA runtime needs:
// CUDA 13 does not run on the R535-R570 drivers many H100 fleets have.
#include <catch2/catch.hpp>

#include "kernels/device_query.h"

TEST_CASE("the minimum driver branch follows NVIDIA's compatibility table") {
    CHECK(tune::minimum_driver_branch(13000) == 580);
    CHECK(tune::minimum_driver_branch(13010) == 580);
    CHECK(tune::minimum_driver_branch(12080) == 525);
    CHECK(tune::minimum_driver_branch(12000) == 525);
    CHECK(tune::minimum_driver_branch(11080) == 450);
    CHECK(tune::minimum_driver_branch(0) == 0);
}
