// NCCL on the emulated device: one rank alone, or several processes under
// MPI (nccl_mpi.h).
#include <nccl.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "device.h"
#include "nccl_comm.h"
#include "nccl_mpi.h"

namespace {

std::size_t type_bytes(ncclDataType_t t) {
    switch (t) {
        case ncclInt8:
        case ncclUint8:
            return 1;
        case ncclFloat16:
        case ncclBfloat16:
            return 2;
        case ncclInt32:
        case ncclUint32:
        case ncclFloat32:
            return 4;
        case ncclInt64:
        case ncclUint64:
        case ncclFloat64:
            return 8;
    }
    return 0;
}

ncclResult_t refuse(ncclComm_t comm, ncclResult_t r, const std::string& why) {
    if (comm != nullptr) comm->last_error = why;
    return r;
}

// A real NCCL records a collective into a graph; the emulator runs collectives at once, so one on a
// capturing stream would run outside the graph: refused instead, saying so.
ncclResult_t not_recorded(ncclComm_t comm, const char* call) {
    return refuse(comm, ncclInvalidUsage, std::string(call) + ": the emulator records no collectives into a graph");
}

// Checks shared by the collectives: the communicator, the type, and that
// both buffers ([send, +send_count) and [recv, +recv_count) elements) are
// device memory. `zero` is set when there is nothing to move.
ncclResult_t check_call(ncclComm_t comm, const void* send, std::size_t send_count, const void* recv,
                        std::size_t recv_count, ncclDataType_t type, const char* name, bool& zero) {
    if (comm == nullptr) return ncclInvalidArgument;
    if (comm->aborted) return refuse(comm, ncclInvalidUsage, std::string(name) + " on an aborted communicator");
    // An asynchronous failure does not stop enqueueing, as in NCCL: only
    // ncclCommGetAsyncError reports it.
    const std::size_t element = type_bytes(type);
    if (element == 0) return refuse(comm, ncclInvalidArgument, std::string(name) + ": bad data type");
    zero = send_count == 0 || recv_count == 0;
    if (zero) return ncclSuccess;
    if (!tune_emu::device().is_device(send, send_count * element) ||
        !tune_emu::device().is_device(recv, recv_count * element))
        return refuse(comm, ncclInvalidArgument, std::string(name) + ": buffers must be device memory");
    return ncclSuccess;
}

// On one rank every collective is a copy of `count` elements (or nothing, in place).
ncclResult_t one_rank_copy(const void* send, void* recv, std::size_t count, ncclDataType_t type) {
    if (send != recv) std::memmove(recv, send, count * type_bytes(type));
    return ncclSuccess;
}

ncclResult_t finish(ncclComm_t comm, ncclResult_t r, const char* name) {
    return r == ncclSuccess ? r : refuse(comm, r, std::string(name) + ": the MPI collective behind it failed");
}

}  // namespace

const char* ncclGetErrorString(ncclResult_t r) {
    switch (r) {
        case ncclSuccess:
            return "no error";
        case ncclUnhandledCudaError:
            return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
        case ncclSystemError:
            return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
        case ncclInternalError:
            return "internal error - please report this issue to the NCCL developers";
        case ncclInvalidArgument:
            return "invalid argument (run with NCCL_DEBUG=WARN for details)";
        case ncclInvalidUsage:
            return "invalid usage (run with NCCL_DEBUG=WARN for details)";
        case ncclRemoteError:
            return "remote process exited or there was a network error";
        case ncclInProgress:
            return "NCCL operation in progress";
        default:
            return "unknown result code";
    }
}

std::string& thread_last_error() {
    thread_local std::string last;
    return last;
}

const char* ncclGetLastError(ncclComm_t comm) {
    return comm != nullptr ? comm->last_error.c_str() : thread_last_error().c_str();
}

ncclResult_t ncclGetVersion(int* version) {
    *version = 22700;
    return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
    std::random_device rd;
    for (char& c : id->internal) c = static_cast<char>(rd() | 1u);  // never all zero
    return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank, ncclConfig_t* config) {
    if (comm == nullptr) return ncclInvalidArgument;
    *comm = nullptr;
    if (const int injected = tune_emu::device().nccl_init_failure.load(); injected != 0) {
        thread_last_error() = tune_emu::device().nccl_failure_detail;
        return static_cast<ncclResult_t>(injected);
    }
    if (nranks < 1 || rank < 0 || rank >= nranks) {
        thread_last_error() = "rank " + std::to_string(rank) + " of " + std::to_string(nranks) + " is not a rank";
        return ncclInvalidArgument;
    }
    auto made = std::make_unique<ncclComm>();
    if (nranks > 1) {
        std::string why;
        if (const ncclResult_t r = tune_emu::nccl_mpi::join(*made, id, nranks, rank, why); r != ncclSuccess) {
            thread_last_error() = why;
            return r;
        }
    }
    *comm = made.release();
    tune_emu::device().reserve_hidden(static_cast<std::int64_t>(tune_emu::kNcclCommBytes));
    // Non-blocking init reports ncclInProgress until polled, as NCCL may.
    if (config != nullptr && config->blocking == 0) (*comm)->async = ncclInProgress;
    return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
    return ncclCommInitRankConfig(comm, nranks, id, rank, nullptr);
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config) {
    if (comm == nullptr || newcomm == nullptr) return ncclInvalidArgument;
    *newcomm = nullptr;
    if (comm->aborted) return refuse(comm, ncclInvalidUsage, "ncclCommSplit on an aborted communicator");
    if (color < 0) return refuse(comm, ncclInvalidArgument, "ncclCommSplit: the emulator has no NCCL_SPLIT_NOCOLOR");
    auto made = std::make_unique<ncclComm>();
    if (comm->nranks > 1) {
        std::string why;
        if (const ncclResult_t r = tune_emu::nccl_mpi::split(*comm, color, key, *made, why); r != ncclSuccess)
            return refuse(comm, r, why);
    }
    *newcomm = made.release();
    tune_emu::device().reserve_hidden(static_cast<std::int64_t>(tune_emu::kNcclCommBytes));
    if (config != nullptr && config->blocking == 0) (*newcomm)->async = ncclInProgress;
    return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
    if (comm == nullptr || count == nullptr) return ncclInvalidArgument;
    *count = comm->nranks;
    return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
    if (comm == nullptr || rank == nullptr) return ncclInvalidArgument;
    *rank = comm->rank;
    return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
    if (comm == nullptr) return ncclSuccess;
    tune_emu::device().reserve_hidden(-static_cast<std::int64_t>(tune_emu::kNcclCommBytes));
    tune_emu::nccl_mpi::leave(*comm);
    delete comm;
    return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) { return ncclCommDestroy(comm); }

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* async_error) {
    if (comm == nullptr || async_error == nullptr) return ncclInvalidArgument;
    if (const int injected = tune_emu::device().nccl_async_failure.load(); injected != 0) {
        comm->async = static_cast<ncclResult_t>(injected);
        comm->last_error = tune_emu::device().nccl_failure_detail;
    }
    *async_error = comm->async;
    if (comm->async == ncclInProgress) comm->async = ncclSuccess;  // done by the next poll
    return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void* send, void* recv, std::size_t count, ncclDataType_t type, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream) {
    if (tune_emu::capturing(stream)) return not_recorded(comm, "ncclAllReduce");
    tune_emu::drain(stream);  // a deferred stream's earlier work first
    if (op != ncclSum && op != ncclAvg && op != ncclMax && op != ncclMin && op != ncclProd)
        return refuse(comm, ncclInvalidArgument, "ncclAllReduce: bad op");
    bool zero = false;
    if (const ncclResult_t r = check_call(comm, send, count, recv, count, type, "ncclAllReduce", zero);
        r != ncclSuccess || zero)
        return r;
    if (comm->nranks == 1) return one_rank_copy(send, recv, count, type);
    return finish(comm, tune_emu::nccl_mpi::all_reduce(*comm, send, recv, count, type, op), "ncclAllReduce");
}

// send holds nranks blocks of recv_count; rank r receives the sum of block r.
ncclResult_t ncclReduceScatter(const void* send, void* recv, std::size_t recv_count, ncclDataType_t type,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
    if (tune_emu::capturing(stream)) return not_recorded(comm, "ncclReduceScatter");
    tune_emu::drain(stream);  // a deferred stream's earlier work first
    bool zero = false;
    const std::size_t ranks = comm != nullptr ? static_cast<std::size_t>(comm->nranks) : 1;
    if (const ncclResult_t r =
            check_call(comm, send, recv_count * ranks, recv, recv_count, type, "ncclReduceScatter", zero);
        r != ncclSuccess || zero)
        return r;
    if (comm->nranks == 1) return one_rank_copy(send, recv, recv_count, type);
    return finish(comm, tune_emu::nccl_mpi::reduce_scatter(*comm, send, recv, recv_count, type, op),
                  "ncclReduceScatter");
}

// recv holds nranks blocks of send_count; block r is rank r's send.
ncclResult_t ncclAllGather(const void* send, void* recv, std::size_t send_count, ncclDataType_t type, ncclComm_t comm,
                           cudaStream_t stream) {
    if (tune_emu::capturing(stream)) return not_recorded(comm, "ncclAllGather");
    tune_emu::drain(stream);  // a deferred stream's earlier work first
    bool zero = false;
    const std::size_t ranks = comm != nullptr ? static_cast<std::size_t>(comm->nranks) : 1;
    if (const ncclResult_t r =
            check_call(comm, send, send_count, recv, send_count * ranks, type, "ncclAllGather", zero);
        r != ncclSuccess || zero)
        return r;
    if (comm->nranks == 1) return one_rank_copy(send, recv, send_count, type);
    return finish(comm, tune_emu::nccl_mpi::all_gather(*comm, send, recv, send_count * type_bytes(type)),
                  "ncclAllGather");
}

ncclResult_t ncclBroadcast(const void* send, void* recv, std::size_t count, ncclDataType_t type, int root,
                           ncclComm_t comm, cudaStream_t stream) {
    if (tune_emu::capturing(stream)) return not_recorded(comm, "ncclBroadcast");
    tune_emu::drain(stream);  // a deferred stream's earlier work first
    if (comm != nullptr && (root < 0 || root >= comm->nranks))
        return refuse(comm, ncclInvalidArgument, "ncclBroadcast: root is not a rank");
    bool zero = false;
    // Only the root's send buffer is read.
    const void* read = comm != nullptr && comm->rank == root ? send : recv;
    if (const ncclResult_t r = check_call(comm, read, count, recv, count, type, "ncclBroadcast", zero);
        r != ncclSuccess || zero)
        return r;
    if (comm->nranks == 1) return one_rank_copy(send, recv, count, type);
    return finish(comm, tune_emu::nccl_mpi::broadcast(*comm, send, recv, count * type_bytes(type), root),
                  "ncclBroadcast");
}

namespace {

// NCCL keeps a group per thread: the transfers posted since ncclGroupStart, run at the outermost end.
struct Group {
    int depth = 0;
    std::vector<tune_emu::nccl_mpi::Transfer> transfers;
};
Group& thread_group() {
    thread_local Group group;
    return group;
}

// A communicator of one rank (or a split part of one) pairs each send with its receive in posting order.
ncclResult_t run_alone(std::span<const tune_emu::nccl_mpi::Transfer> transfers) {
    std::vector<const tune_emu::nccl_mpi::Transfer*> sends, recvs;
    for (const auto& x : transfers) (x.sends ? sends : recvs).push_back(&x);
    if (sends.size() != recvs.size()) return ncclInvalidUsage;
    for (std::size_t i = 0; i < sends.size(); ++i) {
        if (sends[i]->bytes != recvs[i]->bytes) return ncclInvalidUsage;
        std::memmove(recvs[i]->buf, sends[i]->buf, sends[i]->bytes);
    }
    return ncclSuccess;
}

ncclResult_t run_group(std::vector<tune_emu::nccl_mpi::Transfer> transfers) {
    if (transfers.empty()) return ncclSuccess;
    const ncclComm* comm = transfers.front().comm;
    const bool alone = comm->nranks == 1;
    const ncclResult_t r = alone ? run_alone(transfers) : tune_emu::nccl_mpi::send_recv(transfers);
    if (r == ncclSuccess) return r;
    return refuse(const_cast<ncclComm_t>(comm), r, "ncclGroupEnd: the grouped sends and receives failed");
}

ncclResult_t post(bool sends, void* buf, std::size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                  cudaStream_t stream, const char* name) {
    if (tune_emu::capturing(stream)) return not_recorded(comm, name);
    tune_emu::drain(stream);  // a deferred stream's earlier work first
    bool zero = false;
    if (const ncclResult_t r = check_call(comm, buf, count, buf, count, type, name, zero); r != ncclSuccess || zero)
        return r;
    if (peer < 0 || peer >= comm->nranks) return refuse(comm, ncclInvalidArgument, std::string(name) + ": bad peer");
    Group& group = thread_group();
    group.transfers.push_back({sends, buf, count * type_bytes(type), peer, comm});
    if (group.depth > 0) return ncclSuccess;
    return run_group(std::exchange(group.transfers, {}));
}

}  // namespace

ncclResult_t ncclSend(const void* send, std::size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
    return post(true, const_cast<void*>(send), count, type, peer, comm, stream, "ncclSend");
}

ncclResult_t ncclRecv(void* recv, std::size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
    return post(false, recv, count, type, peer, comm, stream, "ncclRecv");
}

ncclResult_t ncclGroupStart() {
    ++thread_group().depth;
    return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
    Group& group = thread_group();
    if (group.depth == 0) return ncclInvalidUsage;
    if (--group.depth > 0) return ncclSuccess;
    return run_group(std::exchange(group.transfers, {}));
}

void tune_emu::nccl_inject_failure(ncclResult_t init_result, ncclResult_t async_result, const char* detail) {
    device().nccl_failure_detail = detail;
    device().nccl_init_failure.store(init_result);
    device().nccl_async_failure.store(async_result);
}
