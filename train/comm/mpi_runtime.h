// MPI's process-wide lifetime as an object: the trial (or a test's main)
// owns one, so MPI is initialized exactly while it lives and never through a
// hidden global. MPI allows one init/finalize per process, so at most one
// MpiRuntime may ever exist in a process.
#pragma once

namespace tune::train {

class MpiRuntime {
public:
    // MPI_Init_thread(FUNNELED): OpenMP threads compute, only the main thread talks.
    // Throws CommError when MPI was already initialized or finalized by someone else.
    MpiRuntime();
    ~MpiRuntime();
    MpiRuntime(const MpiRuntime&) = delete;
    MpiRuntime& operator=(const MpiRuntime&) = delete;

    int rank() const { return rank_; }
    int world_size() const { return world_size_; }
    // Ends every rank of the job with `code` (MPI_Abort): the way out for a
    // rank that failed while the others may wait in a collective forever.
    [[noreturn]] void abort_job(int code) const;

private:
    int rank_ = 0;
    int world_size_ = 1;
};

}  // namespace tune::train
