#include "train/comm/comm_mpi.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/math/half.h"
#include "train/comm/comm_error.h"
#include "train/comm/comm_rules.h"

namespace tune::train {
namespace {

using kernels::DType;

void check(int code, const char* what) {
    if (code == MPI_SUCCESS) return;
    char text[MPI_MAX_ERROR_STRING] = {};
    int length = 0;
    MPI_Error_string(code, text, &length);
    throw CommError(std::string(what) + " failed: " + std::string(text, static_cast<std::size_t>(length)));
}

// MPI counts are int: all-gather and broadcast move a buffer in one call (the
// reductions go in chunks of kStagingElements), which no trial exceeds yet.
int mpi_count(std::int64_t count, const char* what) {
    if (count < 0 || count > INT_MAX)
        throw CommError(std::string(what) + ": count " + std::to_string(count) + " does not fit an MPI int");
    return static_cast<int>(count);
}

bool is_16bit_float(DType t) { return t == DType::bf16 || t == DType::f16; }

// Widen count 16-bit values starting at src into fp32 at dst.
void widen(const void* src, std::int64_t count, DType t, float* dst) {
    const auto* bits = static_cast<const std::uint16_t*>(src);
    for (std::int64_t i = 0; i < count; ++i)
        dst[i] = t == DType::bf16 ? math::to_float(math::bf16{bits[i]}) : math::to_float(math::fp16{bits[i]});
}

// Scale (for averages) and round fp32 values into 16-bit storage at dst.
void narrow(const float* src, std::int64_t count, DType t, float scale, void* dst) {
    auto* bits = static_cast<std::uint16_t*>(dst);
    for (std::int64_t i = 0; i < count; ++i) {
        const float v = src[i] * scale;
        bits[i] = t == DType::bf16 ? math::to_bf16(v).bits : math::to_fp16(v).bits;
    }
}

void scale_f32(float* data, std::int64_t count, float scale) {
    for (std::int64_t i = 0; i < count; ++i) data[i] *= scale;
}

MPI_Datatype sum_type(DType t) { return t == DType::i32 ? MPI_INT : MPI_FLOAT; }

MPI_Op mpi_op(ReduceOp op) { return op == ReduceOp::max ? MPI_MAX : MPI_SUM; }

// `buffer` grown to at least `elements` (it never shrinks: the next call reuses it).
float* staging(std::vector<float>& buffer, std::int64_t elements) {
    if (buffer.size() < static_cast<std::size_t>(elements)) buffer.resize(static_cast<std::size_t>(elements));
    return buffer.data();
}

}  // namespace

MpiComm::MpiComm(const MpiRuntime& runtime) : rank_(runtime.rank()), world_size_(runtime.world_size()) {
    check(MPI_Comm_dup(MPI_COMM_WORLD, &comm_), "MPI_Comm_dup");
    check(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
}

MpiComm::MpiComm(MPI_Comm owned) : comm_(owned) {
    check(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    check(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
    check(MPI_Comm_size(comm_, &world_size_), "MPI_Comm_size");
}

std::unique_ptr<Comm> MpiComm::split(int color, int key) {
    if (color < 0) throw CommError("split: color " + std::to_string(color) + " must not be negative");
    MPI_Comm part = MPI_COMM_NULL;
    check(MPI_Comm_split(comm_, color, key, &part), "MPI_Comm_split");
    return std::unique_ptr<Comm>(new MpiComm(part));
}

MpiComm::~MpiComm() {
    if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

std::int64_t MpiComm::shard_count(std::int64_t count, const char* what) const {
    return shard_count_of(count, world_size_, what);
}

// factor_numerator / world_size of (n-1)/n per unit: 2 for all-reduce, 1 for reduce-scatter and all-gather.
void MpiComm::count_ring_bytes(std::int64_t count, DType dtype, std::uint64_t factor_numerator) {
    bytes_moved_ += ring_bytes(count, dtype, world_size_, factor_numerator);
}

void MpiComm::all_reduce(void* buf, std::int64_t count, DType dtype, ReduceOp op) {
    require_summable(dtype, op, "all_reduce");
    const float scale = op == ReduceOp::average ? 1.0f / static_cast<float>(world_size_) : 1.0f;
    const std::size_t elem = kernels::dtype_bytes(dtype);
    const bool wide = is_16bit_float(dtype);
    const std::int64_t chunk = kStagingElements;
    for (std::int64_t first = 0; first < count; first += chunk) {
        const std::int64_t n = std::min(chunk, count - first);
        void* at = static_cast<unsigned char*>(buf) + static_cast<std::size_t>(first) * elem;
        if (wide) {
            float* sums = staging(send_, n);
            widen(at, n, dtype, sums);
            check(MPI_Allreduce(MPI_IN_PLACE, sums, static_cast<int>(n), MPI_FLOAT, mpi_op(op), comm_),
                  "MPI_Allreduce");
            narrow(sums, n, dtype, scale, at);
        } else {
            check(MPI_Allreduce(MPI_IN_PLACE, at, static_cast<int>(n), sum_type(dtype), mpi_op(op), comm_),
                  "MPI_Allreduce");
        }
    }
    if (dtype == DType::f32 && op == ReduceOp::average) scale_f32(static_cast<float*>(buf), count, scale);
    count_ring_bytes(count, dtype, 2);
}

// Each chunk of the parts (the same columns of every rank's part) is packed
// into the send staging, fp32 for 16-bit buffers, and reduced into the
// receive staging (MPI's in-place form would leave the result at the front,
// not at our part), then copied, or scaled and rounded, into our part.
void MpiComm::reduce_scatter(void* buf, std::int64_t count, DType dtype, ReduceOp op) {
    require_summable(dtype, op, "reduce_scatter");
    const std::int64_t part = shard_count(count, "reduce_scatter");
    const float scale = op == ReduceOp::average ? 1.0f / static_cast<float>(world_size_) : 1.0f;
    const std::size_t elem = kernels::dtype_bytes(dtype);
    const bool wide = is_16bit_float(dtype);
    const std::size_t staged = wide ? sizeof(float) : elem;  // bytes per element in the staging
    const auto* bytes = static_cast<const unsigned char*>(buf);
    auto* owned = static_cast<unsigned char*>(buf) + static_cast<std::size_t>(rank_ * part) * elem;
    const std::int64_t chunk = std::max<std::int64_t>(1, kStagingElements / world_size_);
    for (std::int64_t first = 0; first < part; first += chunk) {
        const std::int64_t n = std::min(chunk, part - first);
        auto* send = reinterpret_cast<unsigned char*>(staging(send_, n * world_size_));
        for (int r = 0; r < world_size_; ++r) {
            const unsigned char* from = bytes + static_cast<std::size_t>(r * part + first) * elem;
            unsigned char* to = send + static_cast<std::size_t>(r * n) * staged;
            if (wide)
                widen(from, n, dtype, reinterpret_cast<float*>(to));
            else
                std::memcpy(to, from, static_cast<std::size_t>(n) * elem);
        }
        void* mine = staging(receive_, n);
        check(MPI_Reduce_scatter_block(send, mine, static_cast<int>(n), wide ? MPI_FLOAT : sum_type(dtype), mpi_op(op),
                                       comm_),
              "MPI_Reduce_scatter_block");
        unsigned char* at = owned + static_cast<std::size_t>(first) * elem;
        if (wide)
            narrow(static_cast<const float*>(mine), n, dtype, scale, at);
        else
            std::memcpy(at, mine, static_cast<std::size_t>(n) * elem);
    }
    if (dtype == DType::f32 && op == ReduceOp::average) scale_f32(reinterpret_cast<float*>(owned), part, scale);
    count_ring_bytes(count, dtype, 1);
}

void MpiComm::all_gather(void* buf, std::int64_t count, DType dtype) {
    const std::int64_t part = shard_count(count, "all_gather");
    // Gathering moves bytes, never arithmetic, so every dtype travels as MPI_BYTE.
    const int part_bytes = mpi_count(part * static_cast<std::int64_t>(kernels::dtype_bytes(dtype)), "all_gather");
    check(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, part_bytes, MPI_BYTE, comm_), "MPI_Allgather");
    count_ring_bytes(count, dtype, 1);
}

void MpiComm::broadcast(void* buf, std::int64_t count, DType dtype, int root) {
    if (root < 0 || root >= world_size_) throw CommError("broadcast: root " + std::to_string(root) + " is not a rank");
    const int bytes = mpi_count(count * static_cast<std::int64_t>(kernels::dtype_bytes(dtype)), "broadcast");
    check(MPI_Bcast(buf, bytes, MPI_BYTE, root, comm_), "MPI_Bcast");
    bytes_moved_ += broadcast_bytes(count, dtype, world_size_);
}

void MpiComm::barrier() { check(MPI_Barrier(comm_), "MPI_Barrier"); }

void MpiComm::send_recv(std::span<const P2POp> ops) {
    check_p2p(ops, rank_, world_size_);
    // Every request is posted before any is waited for, so no ordering of sends and receives deadlocks.
    std::vector<MPI_Request> requests(ops.size(), MPI_REQUEST_NULL);
    for (std::size_t i = 0; i < ops.size(); ++i) {
        const P2POp& op = ops[i];
        const bool sends = op.kind == P2POp::Kind::send;
        const int bytes =
            mpi_count(op.count * static_cast<std::int64_t>(kernels::dtype_bytes(op.dtype)), sends ? "send" : "recv");
        const int code = sends ? MPI_Isend(op.buf, bytes, MPI_BYTE, op.peer, 0, comm_, &requests[i])
                               : MPI_Irecv(op.buf, bytes, MPI_BYTE, op.peer, 0, comm_, &requests[i]);
        // A post MPI refuses fails the trial, whose rank then aborts the job (MpiRuntime::abort_job): waiting
        // for the ones already posted could hang on a peer that never matches them.
        check(code, sends ? "MPI_Isend" : "MPI_Irecv");
    }
    check(MPI_Waitall(static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE), "MPI_Waitall");
    bytes_moved_ += sent_bytes(ops);
}

}  // namespace tune::train
