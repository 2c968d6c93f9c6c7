// The NCCL unique id as plain bytes, and its hex form for the environment.
// Ranks of one NCCL communicator must share the id rank 0 created: under
// mpirun it travels by MPI_Bcast (train/comm/comm_nccl), under srun without MPI
// it can come from the launcher in TUNE_NCCL_ID. No CUDA or NCCL headers
// here (the id is NCCL_UNIQUE_ID_BYTES = 128 opaque bytes), so this is
// built and tested in every configuration.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tune::train {

inline constexpr std::size_t kNcclIdBytes = 128;
using NcclId = std::array<std::uint8_t, kNcclIdBytes>;

// The environment variable that carries a hex-encoded NcclId.
inline constexpr const char* kNcclIdVariable = "TUNE_NCCL_ID";

// 256 lower-case hex digits, first byte first.
std::string encode_nccl_id(const NcclId& id);

// The inverse of encode_nccl_id (either case). Throws CommError naming
// `source` (e.g. the variable) when the text is not exactly 256 hex digits.
NcclId decode_nccl_id(std::string_view hex, std::string_view source = kNcclIdVariable);

// The id in TUNE_NCCL_ID; nullopt when it is unset or empty; CommError when malformed.
std::optional<NcclId> nccl_id_from_environment();

}  // namespace tune::train
