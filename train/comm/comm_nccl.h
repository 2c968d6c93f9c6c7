// Comm over NCCL for ranks on GPUs (device buffers), one GPU per rank: the
// same in-place semantics as comm.h and MpiComm (part r of a buffer owned by
// rank r) and the same byte counting (train/comm/comm_rules.h). Collectives are
// enqueued on the CUDA backend's stream, so they are ordered with its ops and
// the host does not wait for them; buffers in host memory (a rank's result
// summary, the losses) are staged through a device copy and waited for.
// 16-bit sums run in NCCL's own arithmetic (bf16/fp16 on the wire), unlike
// MpiComm's fp32 staging. NCCL failures are CommErrors naming the call, its
// file and line, and ncclGetErrorString's sentence.
//
// No CUDA or NCCL headers here: code that does not know whether this build
// has NCCL calls the factories, which throw CommError "built without NCCL"
// when it has not (train/comm/comm_nccl_missing.cpp); TUNE_HAVE_NCCL is defined
// in builds that have it.
#pragma once

#include <cstdint>
#include <memory>

#include "kernels/backend.h"
#include "train/comm/comm.h"
#include "train/comm/mpi_runtime.h"
#include "train/comm/nccl_id.h"

namespace tune::train {

// Whether this build has NCCL (the CUDA backend is built).
bool nccl_compiled();

// The device a GPU rank binds to: local_rank modulo the visible devices.
// Makes it the calling thread's current device (cudaSetDevice) and returns it.
int bind_local_device(int local_rank);

// A new id from ncclGetUniqueId. The process that makes it hosts NCCL's
// bootstrap root, so it must stay alive until every rank has joined.
NcclId new_nccl_id();

// Where a communicator's collectives run. With a backend (the CUDA backend)
// they go on its stream and its device; without one, the comm binds
// bind_local_device(local_rank), uses a stream of its own and makes every
// collective wait for all earlier work on the device and finish before it
// returns (correct with any producer, but it stalls the host).
struct NcclPlacement {
    int local_rank = 0;
    kernels::Backend* backend = nullptr;
};

class NcclComm final : public Comm {
public:
    // Joins the communicator of `ranks` ranks named by `id` as `rank`
    // (non-blocking ncclCommInitRankConfig, polled until every rank has
    // joined or TUNE_NCCL_TIMEOUT_S passes, then CommError).
    NcclComm(const NcclId& id, int rank, int ranks, const NcclPlacement& where);
    ~NcclComm() override;
    NcclComm(const NcclComm&) = delete;
    NcclComm& operator=(const NcclComm&) = delete;

    int rank() const override { return rank_; }
    int world_size() const override { return world_size_; }
    int device() const { return device_; }
    void all_reduce(void* buf, std::int64_t count, kernels::DType dtype, ReduceOp op) override;
    void reduce_scatter(void* buf, std::int64_t count, kernels::DType dtype, ReduceOp op) override;
    void all_gather(void* buf, std::int64_t count, kernels::DType dtype) override;
    void broadcast(void* buf, std::int64_t count, kernels::DType dtype, int root) override;
    // NCCL has none: a one-element all-reduce that the host waits for.
    void barrier() override;
    // ncclCommSplit (non-blocking, polled as init is), on this communicator's device and stream.
    std::unique_ptr<Comm> split(int color, int key) override;
    // ncclSend and ncclRecv of every op inside one ncclGroupStart/End on the stream; a host buffer goes
    // through a device copy, as run() stages a collective's, and the host waits for the batch.
    void send_recv(std::span<const P2POp> ops) override;
    std::uint64_t bytes_moved() const override { return bytes_moved_; }
    // Device memory NCCL took for this communicator (init and connections).
    std::uint64_t device_bytes() const override { return device_bytes_; }

    // Waits until every collective enqueued so far has finished, polling
    // NCCL's asynchronous errors (a failed peer ends in CommError, not a hang).
    void synchronize();

private:
    struct State;
    NcclComm(const NcclComm& parent, int color, int key);
    // Polls the communicator until its pending init or call is done; on an
    // asynchronous error or at the deadline it aborts it and raises CommError.
    void await(const char* what);
    void abort_comm();
    void connect();
    template <class Enqueue>
    void run(void* buf, std::uint64_t bytes, Enqueue&& enqueue);

    std::unique_ptr<State> state_;
    int rank_ = 0;
    int world_size_ = 1;
    int device_ = 0;
    std::uint64_t bytes_moved_ = 0;
    std::uint64_t used_before_ = 0;  // device memory in use before ncclCommInitRank
    std::uint64_t device_bytes_ = 0;
};

// The ranks of an MPI job as one NCCL communicator: the id comes from
// TUNE_NCCL_ID when it is set, else rank 0 makes it and MPI_Bcast hands it
// to the others. Collective over MPI_COMM_WORLD.
std::unique_ptr<Comm> make_nccl_comm(const MpiRuntime& runtime, const NcclPlacement& where);
std::unique_ptr<Comm> make_nccl_comm(const MpiRuntime& runtime, int local_rank, kernels::Backend* backend = nullptr);

// Without MPI (srun): rank, world size and local rank from the launcher's
// environment (launch.h's rank_environment()), the id from TUNE_NCCL_ID,
// which must be set.
std::unique_ptr<Comm> make_nccl_comm_from_environment(kernels::Backend* backend = nullptr);

// An explicit id, rank and size (tests; a single rank needs no launcher).
std::unique_ptr<Comm> make_nccl_comm(const NcclId& id, int rank, int ranks, const NcclPlacement& where);

}  // namespace tune::train
