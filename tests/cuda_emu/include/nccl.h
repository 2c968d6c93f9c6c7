// Emulated NCCL (tests/cuda_emu). Collectives on one rank leave the data as
// it is (copying when send and receive buffers differ). A communicator of
// more ranks needs the processes to run under MPI (mpirun), one rank each:
// its collectives are MPI's (runtime/nccl_mpi.h). Buffers must be device
// memory, as NCCL requires.
#pragma once

#include <cstddef>

#include "tune_emu/runtime.h"

enum ncclResult_t : int {
    ncclSuccess = 0,
    ncclUnhandledCudaError = 1,
    ncclSystemError = 2,
    ncclInternalError = 3,
    ncclInvalidArgument = 4,
    ncclInvalidUsage = 5,
    ncclRemoteError = 6,
    ncclInProgress = 7,
    ncclNumResults = 8,
};

enum ncclDataType_t : int {
    ncclInt8 = 0,
    ncclChar = 0,
    ncclUint8 = 1,
    ncclInt32 = 2,
    ncclInt = 2,
    ncclUint32 = 3,
    ncclInt64 = 4,
    ncclUint64 = 5,
    ncclFloat16 = 6,
    ncclHalf = 6,
    ncclFloat32 = 7,
    ncclFloat = 7,
    ncclFloat64 = 8,
    ncclDouble = 8,
    ncclBfloat16 = 9,
};

enum ncclRedOp_t : int { ncclSum = 0, ncclProd = 1, ncclMax = 2, ncclMin = 3, ncclAvg = 4 };

#define NCCL_UNIQUE_ID_BYTES 128
struct ncclUniqueId {
    char internal[NCCL_UNIQUE_ID_BYTES];
};

struct ncclComm;
using ncclComm_t = ncclComm*;

struct ncclConfig_t {
    std::size_t size = sizeof(ncclConfig_t);
    unsigned int magic = 0xcafebeef;
    unsigned int version = 0;
    int blocking = 1;
};
#define NCCL_CONFIG_INITIALIZER \
    ncclConfig_t {}

const char* ncclGetErrorString(ncclResult_t result);
const char* ncclGetLastError(ncclComm_t comm);
ncclResult_t ncclGetVersion(int* version);
ncclResult_t ncclGetUniqueId(ncclUniqueId* id);
ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank);
ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank, ncclConfig_t* config);
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t ncclCommAbort(ncclComm_t comm);
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* async_error);
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config);
ncclResult_t ncclCommCount(const ncclComm_t comm, int* count);
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank);

ncclResult_t ncclAllReduce(const void* send, void* recv, std::size_t count, ncclDataType_t type, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclReduceScatter(const void* send, void* recv, std::size_t recv_count, ncclDataType_t type,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclAllGather(const void* send, void* recv, std::size_t send_count, ncclDataType_t type, ncclComm_t comm,
                           cudaStream_t stream);
ncclResult_t ncclBroadcast(const void* send, void* recv, std::size_t count, ncclDataType_t type, int root,
                           ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclSend(const void* send, std::size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                      cudaStream_t stream);
ncclResult_t ncclRecv(void* recv, std::size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                      cudaStream_t stream);
// Sends and receives between a start and its end are posted together at the end (as NCCL fuses them).
ncclResult_t ncclGroupStart();
ncclResult_t ncclGroupEnd();

namespace tune_emu {
// Tests: the next communicator init (or, once made, the next collective's
// asynchronous state) fails with `result`; ncclSuccess clears it.
// `detail` is what ncclGetLastError says about it.
void nccl_inject_failure(ncclResult_t init_result, ncclResult_t async_result, const char* detail = "");
// Device memory each emulated communicator holds, as NCCL's buffers do.
constexpr std::size_t kNcclCommBytes = 6 << 20;
}  // namespace tune_emu
