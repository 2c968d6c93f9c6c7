// The NCCL id's hex form for TUNE_NCCL_ID (srun launches without MPI), the
// byte counting every multi-rank Comm shares, and the NCCL factories' answer
// where they cannot run: all on the CPU, in every build.
#include <catch2/catch.hpp>

#include <cctype>
#include <cstdlib>
#include <string>

#include "kernels/device_query.h"
#include "train/comm/comm_error.h"
#include "train/comm/comm_nccl.h"
#include "train/comm/comm_rules.h"
#include "train/comm/nccl_id.h"

using namespace tune::train;
using tune::kernels::DType;

namespace {

NcclId sample_id() {
    NcclId id{};
    for (std::size_t i = 0; i < id.size(); ++i) id[i] = static_cast<std::uint8_t>(i * 37 + 11);
    return id;
}

// Sets an environment variable for one scope.
struct ScopedEnv {
    std::string name;
    ScopedEnv(const char* n, const char* value) : name(n) {
        if (value)
            setenv(n, value, 1);
        else
            unsetenv(n);
    }
    ~ScopedEnv() { unsetenv(name.c_str()); }
};

}  // namespace

TEST_CASE("an NCCL id survives hex and back, in either case") {
    const NcclId id = sample_id();
    const std::string hex = encode_nccl_id(id);
    CHECK(hex.size() == 256);
    CHECK(hex.find_first_not_of("0123456789abcdef") == std::string::npos);
    CHECK(hex.substr(0, 4) == "0b30");  // 11, 48: first byte first
    CHECK(decode_nccl_id(hex) == id);
    std::string upper = hex;
    for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    CHECK(decode_nccl_id(upper) == id);
    NcclId extremes{};
    extremes.fill(0xFF);
    extremes[0] = 0;
    CHECK(decode_nccl_id(encode_nccl_id(extremes)) == extremes);
}

TEST_CASE("a malformed NCCL id names its source and what is wrong") {
    const std::string hex = encode_nccl_id(sample_id());
    CHECK_THROWS_AS(decode_nccl_id(hex.substr(1)), CommError);
    CHECK_THROWS_WITH(decode_nccl_id(hex.substr(1)), Catch::Contains("TUNE_NCCL_ID") &&
                                                         Catch::Contains("256 hex digits") &&
                                                         Catch::Contains("got 255"));
    CHECK_THROWS_WITH(decode_nccl_id(hex + "00"), Catch::Contains("got 258"));
    CHECK_THROWS_WITH(decode_nccl_id(""), Catch::Contains("got 0"));
    std::string bad = hex;
    bad[17] = 'g';
    CHECK_THROWS_WITH(decode_nccl_id(bad), Catch::Contains("TUNE_NCCL_ID") && Catch::Contains("'g' at position 17"));
    CHECK_THROWS_WITH(decode_nccl_id(bad, "--nccl-id"), Catch::StartsWith("--nccl-id:"));
}

TEST_CASE("TUNE_NCCL_ID is read from the environment when set") {
    {
        ScopedEnv unset(kNcclIdVariable, nullptr);
        CHECK_FALSE(nccl_id_from_environment().has_value());
    }
    {
        ScopedEnv empty(kNcclIdVariable, "");
        CHECK_FALSE(nccl_id_from_environment().has_value());
    }
    {
        const std::string hex = encode_nccl_id(sample_id());
        ScopedEnv set(kNcclIdVariable, hex.c_str());
        REQUIRE(nccl_id_from_environment().has_value());
        CHECK(*nccl_id_from_environment() == sample_id());
    }
    {
        ScopedEnv bad(kNcclIdVariable, "xyz");
        CHECK_THROWS_WITH(nccl_id_from_environment(), Catch::Contains("TUNE_NCCL_ID"));
    }
}

TEST_CASE("collectives count ring bytes: all-reduce 2(n-1)/n, shards (n-1)/n, broadcast all, one rank nothing") {
    // 1000 fp32 elements = 4000 bytes.
    CHECK(ring_bytes(1000, DType::f32, 4, 2) == 6000);
    CHECK(ring_bytes(1000, DType::f32, 4, 1) == 3000);
    CHECK(ring_bytes(1000, DType::bf16, 2, 2) == 2000);
    CHECK(ring_bytes(1000, DType::u8, 8, 1) == 875);
    CHECK(ring_bytes(1000, DType::f32, 1, 2) == 0);
    CHECK(broadcast_bytes(1000, DType::i32, 3) == 4000);
    CHECK(broadcast_bytes(1000, DType::i32, 1) == 0);
    CHECK(shard_count_of(12, 4, "x") == 3);
    CHECK_THROWS_WITH(shard_count_of(10, 4, "reduce_scatter"),
                      Catch::Contains("reduce_scatter: count 10 is not a multiple of world size 4"));
    CHECK_THROWS_AS(require_summable(DType::u8, ReduceOp::sum, "all_reduce"), CommError);
    CHECK_THROWS_AS(require_summable(DType::i32, ReduceOp::average, "all_reduce"), CommError);
    CHECK_NOTHROW(require_summable(DType::i32, ReduceOp::sum, "all_reduce"));
    CHECK_NOTHROW(require_summable(DType::bf16, ReduceOp::average, "all_reduce"));
}

TEST_CASE("the NCCL factories say why they cannot run here") {
    if (!nccl_compiled()) {
        CHECK_THROWS_AS(make_nccl_comm_from_environment(), CommError);
        CHECK_THROWS_WITH(make_nccl_comm(sample_id(), 0, 1, NcclPlacement{}), Catch::Contains("no NCCL"));
        CHECK_THROWS_WITH(new_nccl_id(), Catch::Contains("no NCCL"));
        return;
    }
    // Built with NCCL: without MPI the id must come from the environment.
    ScopedEnv unset(kNcclIdVariable, nullptr);
    CHECK_THROWS_WITH(make_nccl_comm_from_environment(), Catch::Contains("TUNE_NCCL_ID is not set"));
    if (tune::query_devices().devices.empty()) {
        // Binding a device is the first thing a rank does; without one it says so.
        CHECK_THROWS_WITH(bind_local_device(0), Catch::Contains("needs a CUDA device"));
    }
    // A blank id is refused before NCCL is asked to join anything.
    CHECK_THROWS_WITH(make_nccl_comm(NcclId{}, 0, 1, NcclPlacement{}), Catch::Contains("all zeros"));
    CHECK_THROWS_WITH(make_nccl_comm(sample_id(), 2, 2, NcclPlacement{}), Catch::Contains("rank 2 of 2"));
}
