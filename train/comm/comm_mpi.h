// Comm over MPI for ranks on the CPU (host buffers). Sums run in fp32: MPI
// has no bf16 type, so 16-bit buffers are widened into an fp32 staging copy,
// reduced, scaled (average = sum / world_size) and rounded once on the way
// back, which is at least as accurate as NCCL's native 16-bit sums.
//
// The staging (fp32 sums, a reduce-scatter's packed parts and its result) is
// kept between calls and holds at most kStagingElements, a larger buffer going
// through in chunks, as NCCL keeps its own buffers: staging allocated per call
// comes back from the C allocator as fresh pages (blocks over 128 KiB are
// mapped and unmapped), a page fault per 4 KiB on every collective.
//
// bytes_moved() counts what a bandwidth-optimal ring moves per rank for a
// buffer of S bytes in the buffer's own dtype (the fp32 staging is an
// artefact of MPI, not traffic the trainer asked for), i.e. nccl-tests'
// busbw factors: all-reduce 2(n-1)/n*S, reduce-scatter and all-gather
// (n-1)/n*S, broadcast S, barrier 0, a point-to-point send S.
#pragma once

// The C API only: OpenMPI's C++ bindings (removed in MPI-3) fail -Wextra -Werror.
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#include <mpi.h>

#include <cstdint>
#include <vector>

#include "train/comm/comm.h"
#include "train/comm/mpi_runtime.h"

namespace tune::train {

class MpiComm final : public Comm {
public:
    // Duplicates MPI_COMM_WORLD so our traffic never matches anyone else's;
    // errors come back as CommError instead of aborting the process.
    explicit MpiComm(const MpiRuntime& runtime);
    ~MpiComm() override;
    MpiComm(const MpiComm&) = delete;
    MpiComm& operator=(const MpiComm&) = delete;

    int rank() const override { return rank_; }
    int world_size() const override { return world_size_; }
    void all_reduce(void* buf, std::int64_t count, kernels::DType dtype, ReduceOp op) override;
    void reduce_scatter(void* buf, std::int64_t count, kernels::DType dtype, ReduceOp op) override;
    void all_gather(void* buf, std::int64_t count, kernels::DType dtype) override;
    void broadcast(void* buf, std::int64_t count, kernels::DType dtype, int root) override;
    void barrier() override;
    // MPI_Comm_split of this communicator.
    std::unique_ptr<Comm> split(int color, int key) override;
    // MPI_Isend and MPI_Irecv of every op, then one MPI_Waitall; bytes travel as MPI_BYTE.
    void send_recv(std::span<const P2POp> ops) override;
    std::uint64_t bytes_moved() const override { return bytes_moved_; }

    // Elements a reduction stages at once: 1 MiB of fp32 sums (a reduce-scatter's
    // chunk of each part is this over the rank count); a larger buffer goes in chunks.
    static constexpr std::int64_t kStagingElements = std::int64_t{1} << 18;

private:
    explicit MpiComm(MPI_Comm owned);  // takes a communicator MPI_Comm_split made
    std::int64_t shard_count(std::int64_t count, const char* what) const;
    void count_ring_bytes(std::int64_t count, kernels::DType dtype, std::uint64_t factor_numerator);

    MPI_Comm comm_ = MPI_COMM_NULL;
    int rank_ = 0;
    int world_size_ = 1;
    std::uint64_t bytes_moved_ = 0;
    std::vector<float> send_, receive_;  // the staging: 4 bytes an element, any summable dtype
};

}  // namespace tune::train
