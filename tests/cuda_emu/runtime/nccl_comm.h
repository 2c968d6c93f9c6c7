// The emulated NCCL communicator: one rank alone, or a rank of several
// processes under MPI (nccl_mpi.h), each process holding its own emulated
// device whose memory is host memory MPI can read and write.
#pragma once

// The C API only: OpenMPI's C++ bindings (removed in MPI-3) fail -Wextra -Werror.
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#include <mpi.h>
#include <nccl.h>

#include <string>

struct ncclComm {
    std::string last_error;
    ncclResult_t async = ncclSuccess;
    bool aborted = false;
    int rank = 0;
    int nranks = 1;
    MPI_Comm mpi = MPI_COMM_NULL;  // the ranks' own communicator when nranks > 1
};
