// One-rank NCCL on the emulated device.
#include <nccl.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>

#include "device.h"

struct ncclComm {
    std::string last_error;
    ncclResult_t async = ncclSuccess;
    bool aborted = false;
};

namespace {

std::size_t type_bytes(ncclDataType_t t) {
    switch (t) {
        case ncclInt8:
        case ncclUint8: return 1;
        case ncclFloat16:
        case ncclBfloat16: return 2;
        case ncclInt32:
        case ncclUint32:
        case ncclFloat32: return 4;
        case ncclInt64:
        case ncclUint64:
        case ncclFloat64: return 8;
    }
    return 0;
}

ncclResult_t refuse(ncclComm_t comm, ncclResult_t r, const std::string& why) {
    if (comm != nullptr) comm->last_error = why;
    return r;
}

// Checks shared by the collectives; on one rank each is a copy of `bytes`.
ncclResult_t one_rank_copy(ncclComm_t comm, const void* send, void* recv, std::size_t count, ncclDataType_t type,
                           const char* name) {
    if (comm == nullptr) return ncclInvalidArgument;
    if (comm->aborted) return refuse(comm, ncclInvalidUsage, std::string(name) + " on an aborted communicator");
    // An asynchronous failure does not stop enqueueing, as in NCCL: only
    // ncclCommGetAsyncError reports it.
    const std::size_t bytes = count * type_bytes(type);
    if (type_bytes(type) == 0) return refuse(comm, ncclInvalidArgument, std::string(name) + ": bad data type");
    if (bytes == 0) return ncclSuccess;
    if (!tune_emu::device().is_device(send, bytes) || !tune_emu::device().is_device(recv, bytes))
        return refuse(comm, ncclInvalidArgument, std::string(name) + ": buffers must be device memory");
    if (send != recv) std::memmove(recv, send, bytes);
    return ncclSuccess;
}

}  // namespace

const char* ncclGetErrorString(ncclResult_t r) {
    switch (r) {
        case ncclSuccess: return "no error";
        case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
        case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
        case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
        case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
        case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
        case ncclRemoteError: return "remote process exited or there was a network error";
        case ncclInProgress: return "NCCL operation in progress";
        default: return "unknown result code";
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

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId, int rank, ncclConfig_t* config) {
    if (comm == nullptr) return ncclInvalidArgument;
    *comm = nullptr;
    if (const int injected = tune_emu::device().nccl_init_failure.load(); injected != 0) {
        thread_last_error() = tune_emu::device().nccl_failure_detail;
        return static_cast<ncclResult_t>(injected);
    }
    if (nranks != 1 || rank != 0) {
        thread_last_error() = "the emulated device has one rank";
        return ncclInvalidUsage;
    }
    *comm = new ncclComm;
    tune_emu::device().reserve_hidden(static_cast<std::int64_t>(tune_emu::kNcclCommBytes));
    // Non-blocking init reports ncclInProgress until polled, as NCCL may.
    if (config != nullptr && config->blocking == 0) (*comm)->async = ncclInProgress;
    return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
    return ncclCommInitRankConfig(comm, nranks, id, rank, nullptr);
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
    if (comm != nullptr) tune_emu::device().reserve_hidden(-static_cast<std::int64_t>(tune_emu::kNcclCommBytes));
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
                           ncclComm_t comm, cudaStream_t) {
    if (op != ncclSum && op != ncclAvg && op != ncclMax && op != ncclMin && op != ncclProd)
        return refuse(comm, ncclInvalidArgument, "ncclAllReduce: bad op");
    return one_rank_copy(comm, send, recv, count, type, "ncclAllReduce");
}

ncclResult_t ncclReduceScatter(const void* send, void* recv, std::size_t recv_count, ncclDataType_t type,
                               ncclRedOp_t, ncclComm_t comm, cudaStream_t) {
    return one_rank_copy(comm, send, recv, recv_count, type, "ncclReduceScatter");
}

ncclResult_t ncclAllGather(const void* send, void* recv, std::size_t send_count, ncclDataType_t type, ncclComm_t comm,
                           cudaStream_t) {
    return one_rank_copy(comm, send, recv, send_count, type, "ncclAllGather");
}

ncclResult_t ncclBroadcast(const void* send, void* recv, std::size_t count, ncclDataType_t type, int root,
                           ncclComm_t comm, cudaStream_t) {
    if (root != 0) return refuse(comm, ncclInvalidArgument, "ncclBroadcast: root is not a rank");
    return one_rank_copy(comm, send, recv, count, type, "ncclBroadcast");
}

void tune_emu::nccl_inject_failure(ncclResult_t init_result, ncclResult_t async_result, const char* detail) {
    device().nccl_failure_detail = detail;
    device().nccl_init_failure.store(init_result);
    device().nccl_async_failure.store(async_result);
}
