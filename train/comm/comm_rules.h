// What every multi-rank Comm (comm_mpi, comm_nccl) agrees on, so they
// reject the same requests with the same words and count the same bytes.
//
// Byte counting: what a bandwidth-optimal ring moves per rank for a buffer of
// S bytes in the buffer's own dtype, i.e. nccl-tests' busbw factors:
// all-reduce 2(n-1)/n*S, reduce-scatter and all-gather (n-1)/n*S,
// broadcast S (nothing on one rank), barrier 0; a point-to-point send S and its receive 0.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include <fmt/format.h>

#include "kernels/dtype.h"
#include "train/comm/comm.h"
#include "train/comm/comm_error.h"

namespace tune::train {

// factor_numerator * (n-1)/n of the buffer: 2 for all-reduce, 1 for reduce-scatter and all-gather.
inline std::uint64_t ring_bytes(std::int64_t count, kernels::DType dtype, int ranks, std::uint64_t factor_numerator) {
    const std::uint64_t bytes = static_cast<std::uint64_t>(count) * kernels::dtype_bytes(dtype);
    const auto n = static_cast<std::uint64_t>(ranks);
    return factor_numerator * (n - 1) * bytes / n;
}

// Every byte of a broadcast crosses one link (nccl-tests' busbw factor 1).
inline std::uint64_t broadcast_bytes(std::int64_t count, kernels::DType dtype, int ranks) {
    return ranks > 1 ? static_cast<std::uint64_t>(count) * kernels::dtype_bytes(dtype) : 0;
}

// count / ranks, or CommError when count does not split into equal parts.
inline std::int64_t shard_count_of(std::int64_t count, int ranks, const char* what) {
    if (count % ranks != 0)
        throw CommError(std::string(what) + ": count " + std::to_string(count) + " is not a multiple of world size " +
                        std::to_string(ranks));
    return count / ranks;
}

inline void require_summable(kernels::DType t, ReduceOp op, const char* what) {
    if (t == kernels::DType::u8)
        throw CommError(std::string(what) + ": u8 buffers hold quantized states and cannot be summed");
    if (t == kernels::DType::i32 && op == ReduceOp::average)
        throw CommError(std::string(what) + ": averaging i32 buffers is not defined");
}

// Refuses a transfer to a rank that is not one, to this rank itself, or of a negative count, naming it.
inline void check_p2p(std::span<const P2POp> ops, int rank, int ranks) {
    for (const P2POp& op : ops) {
        const char* what = op.kind == P2POp::Kind::send ? "send" : "recv";
        if (op.peer < 0 || op.peer >= ranks)
            throw CommError(fmt::format("{}: rank {} of {}: peer {} is not a rank", what, rank, ranks, op.peer));
        if (op.peer == rank)
            throw CommError(fmt::format("{}: rank {} of {}: peer {} is this rank; a rank keeps its own data", what,
                                        rank, ranks, op.peer));
        if (op.count < 0)
            throw CommError(fmt::format("{}: rank {} to peer {}: negative count {}", what, rank, op.peer, op.count));
    }
}

// The bytes a batch sends: its receives move nothing of this rank's.
inline std::uint64_t sent_bytes(std::span<const P2POp> ops) {
    std::uint64_t bytes = 0;
    for (const P2POp& op : ops)
        if (op.kind == P2POp::Kind::send)
            bytes += static_cast<std::uint64_t>(op.count) * kernels::dtype_bytes(op.dtype);
    return bytes;
}

}  // namespace tune::train
