#include "train/comm/mpi_runtime.h"

// The C API only: OpenMPI's C++ bindings (removed in MPI-3) fail -Wextra -Werror.
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#include <mpi.h>

#include <cstdlib>
#include <string>

#include "train/comm/comm_error.h"
#include "train/memory/heap_reuse.h"

namespace tune::train {

MpiRuntime::MpiRuntime() {
    keep_freed_heap_blocks();  // before MPI allocates: its per-collective temporaries are reused, not faulted in
    int initialized = 0;
    int finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (initialized || finalized)
        throw CommError("MPI was already initialized in this process; only one MpiRuntime may exist");
    int provided = 0;
    if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
        throw CommError("MPI_Init_thread failed");
    if (provided < MPI_THREAD_FUNNELED) {
        MPI_Finalize();
        throw CommError("MPI provides thread level " + std::to_string(provided) + ", FUNNELED is needed");
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size_);
}

MpiRuntime::~MpiRuntime() { MPI_Finalize(); }

void MpiRuntime::abort_job(int code) const {
    MPI_Abort(MPI_COMM_WORLD, code);
    std::abort();  // MPI_Abort does not return; this keeps [[noreturn]] true if it ever did
}

}  // namespace tune::train
