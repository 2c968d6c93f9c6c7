// The emulated NCCL's collectives over MPI, for communicators of more than
// one rank. Streams on the emulated device run their work when it is
// enqueued, so each collective runs the matching MPI collective at once,
// after everything enqueued before it on any stream. 16-bit floats are
// reduced in fp32 and rounded once (as NCCL's kernels do within a step), the
// rest in their own type; ncclAvg divides the sum by the rank count.
#pragma once

#include <cstddef>
#include <span>
#include <string>

#include "nccl_comm.h"

namespace tune_emu::nccl_mpi {

// Makes comm.mpi: the MPI_COMM_WORLD ranks that joined with the same id,
// ordered by `rank` (collective over MPI_COMM_WORLD, as the trainer's ranks
// are). Fails with a reason when MPI is not running or the ranks disagree.
ncclResult_t join(ncclComm& comm, const ncclUniqueId& id, int nranks, int rank, std::string& why);
void leave(ncclComm& comm);
// `out` becomes the part of `parent` (several ranks) whose ranks passed `color`, ranked by `key`.
ncclResult_t split(const ncclComm& parent, int color, int key, ncclComm& out, std::string& why);

ncclResult_t all_reduce(const ncclComm& comm, const void* send, void* recv, std::size_t count, ncclDataType_t type,
                        ncclRedOp_t op);
ncclResult_t reduce_scatter(const ncclComm& comm, const void* send, void* recv, std::size_t recv_count,
                            ncclDataType_t type, ncclRedOp_t op);
ncclResult_t all_gather(const ncclComm& comm, const void* send, void* recv, std::size_t send_bytes);
ncclResult_t broadcast(const ncclComm& comm, const void* send, void* recv, std::size_t bytes, int root);

// One side of a grouped point-to-point transfer, `bytes` to or from `peer` of `comm`.
struct Transfer {
    bool sends = true;
    void* buf = nullptr;
    std::size_t bytes = 0;
    int peer = 0;
    const ncclComm* comm = nullptr;
};
// Posts every transfer (MPI_Isend / MPI_Irecv on its communicator) and waits for all of them.
ncclResult_t send_recv(std::span<const Transfer> transfers);

}  // namespace tune_emu::nccl_mpi
