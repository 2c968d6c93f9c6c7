#include "nccl_mpi.h"

#include <climits>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/math/half.h"

namespace tune_emu::nccl_mpi {
namespace {

namespace math = tune::math;

// f(T{}) with T the element type of an NCCL data type.
template <class F>
ncclResult_t with_element(ncclDataType_t t, F&& f) {
    switch (t) {
        case ncclInt8:
            return f(std::int8_t{});
        case ncclUint8:
            return f(std::uint8_t{});
        case ncclInt32:
            return f(std::int32_t{});
        case ncclUint32:
            return f(std::uint32_t{});
        case ncclInt64:
            return f(std::int64_t{});
        case ncclUint64:
            return f(std::uint64_t{});
        case ncclFloat16:
            return f(math::fp16{});
        case ncclFloat32:
            return f(float{});
        case ncclFloat64:
            return f(double{});
        case ncclBfloat16:
            return f(math::bf16{});
    }
    return ncclInvalidArgument;
}

template <class T>
constexpr bool is_16bit_float = std::is_same_v<T, math::bf16> || std::is_same_v<T, math::fp16>;

// What MPI reduces for T: fp32 for the 16-bit floats, T itself otherwise.
template <class T>
using Wire = std::conditional_t<is_16bit_float<T>, float, T>;

template <class W>
MPI_Datatype mpi_type() {
    if constexpr (std::is_same_v<W, std::int8_t>)
        return MPI_INT8_T;
    else if constexpr (std::is_same_v<W, std::uint8_t>)
        return MPI_UINT8_T;
    else if constexpr (std::is_same_v<W, std::int32_t>)
        return MPI_INT32_T;
    else if constexpr (std::is_same_v<W, std::uint32_t>)
        return MPI_UINT32_T;
    else if constexpr (std::is_same_v<W, std::int64_t>)
        return MPI_INT64_T;
    else if constexpr (std::is_same_v<W, std::uint64_t>)
        return MPI_UINT64_T;
    else if constexpr (std::is_same_v<W, float>)
        return MPI_FLOAT;
    else
        return MPI_DOUBLE;
}

template <class T>
std::vector<Wire<T>> widen(const void* p, std::size_t count) {
    std::vector<Wire<T>> out(count);
    const T* in = static_cast<const T*>(p);
    for (std::size_t i = 0; i < count; ++i) {
        if constexpr (is_16bit_float<T>)
            out[i] = math::to_float(in[i]);
        else
            out[i] = in[i];
    }
    return out;
}

// Stores the reduced values, divided by the rank count for ncclAvg, rounded once to T.
template <class T>
void narrow(const std::vector<Wire<T>>& wire, void* p, ncclRedOp_t op, int nranks) {
    T* out = static_cast<T*>(p);
    for (std::size_t i = 0; i < wire.size(); ++i) {
        Wire<T> v = wire[i];
        if (op == ncclAvg) v = static_cast<Wire<T>>(v / static_cast<Wire<T>>(nranks));
        if constexpr (is_16bit_float<T>)
            out[i] = math::from_float<T>(v);
        else
            out[i] = v;
    }
}

MPI_Op mpi_op(ncclRedOp_t op) {
    switch (op) {
        case ncclProd:
            return MPI_PROD;
        case ncclMax:
            return MPI_MAX;
        case ncclMin:
            return MPI_MIN;
        default:
            return MPI_SUM;  // ncclSum, and ncclAvg before its division
    }
}

// MPI counts are int: larger buffers would need chunking, which no test here reaches.
bool fits_int(std::size_t n) { return n <= static_cast<std::size_t>(INT_MAX); }

ncclResult_t mpi_result(int status) { return status == MPI_SUCCESS ? ncclSuccess : ncclSystemError; }

}  // namespace

ncclResult_t join(ncclComm& comm, const ncclUniqueId& id, int nranks, int rank, std::string& why) {
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (initialized == 0 || finalized != 0) {
        why = "the emulated device serves more than one NCCL rank only under MPI (mpirun), and MPI is not running";
        return ncclInvalidUsage;
    }
    // Ranks that joined with the same id share a color.
    std::uint32_t color = 2166136261u;
    for (char c : id.internal) color = (color ^ static_cast<unsigned char>(c)) * 16777619u;
    MPI_Comm mine = MPI_COMM_NULL;
    if (MPI_Comm_split(MPI_COMM_WORLD, static_cast<int>(color & 0x7fffffffu), rank, &mine) != MPI_SUCCESS) {
        why = "MPI_Comm_split failed";
        return ncclSystemError;
    }
    int size = 0, position = 0;
    MPI_Comm_size(mine, &size);
    MPI_Comm_rank(mine, &position);
    if (size != nranks || position != rank) {
        why = "the processes that joined this id under MPI are " + std::to_string(size) + " (this one at " +
              std::to_string(position) + "), not rank " + std::to_string(rank) + " of " + std::to_string(nranks);
        MPI_Comm_free(&mine);
        return ncclInvalidUsage;
    }
    comm.mpi = mine;
    comm.rank = rank;
    comm.nranks = nranks;
    return ncclSuccess;
}

ncclResult_t split(const ncclComm& parent, int color, int key, ncclComm& out, std::string& why) {
    MPI_Comm part = MPI_COMM_NULL;
    if (MPI_Comm_split(parent.mpi, color, key, &part) != MPI_SUCCESS) {
        why = "MPI_Comm_split failed";
        return ncclSystemError;
    }
    MPI_Comm_size(part, &out.nranks);
    MPI_Comm_rank(part, &out.rank);
    if (out.nranks == 1) MPI_Comm_free(&part);  // alone, every collective is a copy
    out.mpi = part;
    return ncclSuccess;
}

void leave(ncclComm& comm) {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (comm.mpi != MPI_COMM_NULL && finalized == 0) MPI_Comm_free(&comm.mpi);
    comm.mpi = MPI_COMM_NULL;
}

ncclResult_t all_reduce(const ncclComm& comm, const void* send, void* recv, std::size_t count, ncclDataType_t type,
                        ncclRedOp_t op) {
    if (!fits_int(count)) return ncclInvalidArgument;
    return with_element(type, [&](auto tag) {
        using T = decltype(tag);
        const std::vector<Wire<T>> in = widen<T>(send, count);
        std::vector<Wire<T>> out(count);
        const int status =
            MPI_Allreduce(in.data(), out.data(), static_cast<int>(count), mpi_type<Wire<T>>(), mpi_op(op), comm.mpi);
        narrow<T>(out, recv, op, comm.nranks);
        return mpi_result(status);
    });
}

ncclResult_t reduce_scatter(const ncclComm& comm, const void* send, void* recv, std::size_t recv_count,
                            ncclDataType_t type, ncclRedOp_t op) {
    if (!fits_int(recv_count * static_cast<std::size_t>(comm.nranks))) return ncclInvalidArgument;
    return with_element(type, [&](auto tag) {
        using T = decltype(tag);
        // Copied first: in place, recv is this rank's block inside send.
        const std::vector<Wire<T>> in = widen<T>(send, recv_count * static_cast<std::size_t>(comm.nranks));
        std::vector<Wire<T>> out(recv_count);
        const int status = MPI_Reduce_scatter_block(in.data(), out.data(), static_cast<int>(recv_count),
                                                    mpi_type<Wire<T>>(), mpi_op(op), comm.mpi);
        narrow<T>(out, recv, op, comm.nranks);
        return mpi_result(status);
    });
}

ncclResult_t all_gather(const ncclComm& comm, const void* send, void* recv, std::size_t send_bytes) {
    if (!fits_int(send_bytes * static_cast<std::size_t>(comm.nranks))) return ncclInvalidArgument;
    // Copied first: in place, send is this rank's block inside recv.
    const std::vector<char> in(static_cast<const char*>(send), static_cast<const char*>(send) + send_bytes);
    const int n = static_cast<int>(send_bytes);
    return mpi_result(MPI_Allgather(in.data(), n, MPI_BYTE, recv, n, MPI_BYTE, comm.mpi));
}

ncclResult_t broadcast(const ncclComm& comm, const void* send, void* recv, std::size_t bytes, int root) {
    if (!fits_int(bytes)) return ncclInvalidArgument;
    if (comm.rank == root && send != recv) std::memmove(recv, send, bytes);
    return mpi_result(MPI_Bcast(recv, static_cast<int>(bytes), MPI_BYTE, root, comm.mpi));
}

ncclResult_t send_recv(std::span<const Transfer> transfers) {
    std::vector<MPI_Request> requests;
    requests.reserve(transfers.size());
    for (const Transfer& x : transfers) {
        if (!fits_int(x.bytes)) return ncclInvalidArgument;
        MPI_Request r = MPI_REQUEST_NULL;
        const int n = static_cast<int>(x.bytes);
        const int status = x.sends ? MPI_Isend(x.buf, n, MPI_BYTE, x.peer, 0, x.comm->mpi, &r)
                                   : MPI_Irecv(x.buf, n, MPI_BYTE, x.peer, 0, x.comm->mpi, &r);
        if (status != MPI_SUCCESS) return mpi_result(status);
        requests.push_back(r);
    }
    return mpi_result(MPI_Waitall(static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE));
}

}  // namespace tune_emu::nccl_mpi
