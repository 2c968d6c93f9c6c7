// Collectives over flat device buffers, behind one small interface so the
// trainer is the same on one rank, under MPI (CPU) and under NCCL (GPUs).
// Buffers are whole flat buffers of `count` elements; shard operations split
// them in world_size() equal parts (count must be a multiple of world_size()),
// rank r owning part r.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "kernels/dtype.h"

namespace tune::train {

// max: the vocabulary-parallel cross-entropy's row maxima (kernels/lm_head_loss.h RowCombine).
enum class ReduceOp : std::uint8_t { sum, average, max };

// One side of a point-to-point transfer: `count` elements of buf go to (send) or come from (recv) rank `peer`.
// Pipeline stages pass activations and their gradients this way, and ring attention its K/V blocks.
struct P2POp {
    enum class Kind : std::uint8_t { send, recv };
    Kind kind = Kind::send;
    void* buf = nullptr;
    std::int64_t count = 0;
    kernels::DType dtype = kernels::DType::f32;
    int peer = 0;
};

class Comm {
public:
    virtual ~Comm() = default;
    virtual int rank() const = 0;
    virtual int world_size() const = 0;

    // buf (count) on every rank becomes the reduction over ranks.
    virtual void all_reduce(void* buf, std::int64_t count, kernels::DType dtype, ReduceOp op) = 0;
    // In place: part rank() of buf (count) becomes the reduction of that part over ranks; the rest is undefined.
    virtual void reduce_scatter(void* buf, std::int64_t count, kernels::DType dtype, ReduceOp op) = 0;
    // In place: every part of buf (count) becomes its owner's part.
    virtual void all_gather(void* buf, std::int64_t count, kernels::DType dtype) = 0;
    virtual void broadcast(void* buf, std::int64_t count, kernels::DType dtype, int root) = 0;
    virtual void barrier() = 0;
    // A communicator of the ranks that pass the same `color`, ranked by `key`
    // (ties by rank): the tensor- and data-parallel groups of a dp x tp grid.
    // Collective: every rank calls it. The new communicator counts its own
    // bytes; this one must outlive it.
    virtual std::unique_ptr<Comm> split(int color, int key) = 0;

    // Posts every send and receive of `ops` at once and returns when all are done (NCCL's grouped
    // ncclSend/ncclRecv, torch's batch_isend_irecv), so a ring where every rank sends before it receives
    // cannot deadlock. Messages between two ranks match in the order they are posted.
    virtual void send_recv(std::span<const P2POp> ops) = 0;
    // One blocking transfer: the peer posts the matching recv (or send).
    void send(const void* buf, std::int64_t count, kernels::DType dtype, int peer) {
        const P2POp op{P2POp::Kind::send, const_cast<void*>(buf), count, dtype, peer};
        send_recv({&op, 1});
    }
    void recv(void* buf, std::int64_t count, kernels::DType dtype, int peer) {
        const P2POp op{P2POp::Kind::recv, buf, count, dtype, peer};
        send_recv({&op, 1});
    }

    // Bytes this rank sent through collectives since construction.
    virtual std::uint64_t bytes_moved() const = 0;
    // Device memory the communicator itself holds (NCCL's buffers), which
    // the trial adds to `overhead`; 0 for host-side communicators.
    virtual std::uint64_t device_bytes() const { return 0; }
};

// One rank: every collective is the identity and moves nothing.
class SingleRankComm final : public Comm {
public:
    int rank() const override { return 0; }
    int world_size() const override { return 1; }
    void all_reduce(void*, std::int64_t, kernels::DType, ReduceOp) override {}
    void reduce_scatter(void*, std::int64_t, kernels::DType, ReduceOp) override {}
    void all_gather(void*, std::int64_t, kernels::DType) override {}
    void broadcast(void*, std::int64_t, kernels::DType, int) override {}
    void barrier() override {}
    std::unique_ptr<Comm> split(int, int) override { return std::make_unique<SingleRankComm>(); }
    // One rank has no peer: any transfer names a rank that is not one (comm_rules.h says which).
    void send_recv(std::span<const P2POp> ops) override;
    std::uint64_t bytes_moved() const override { return 0; }
};

}  // namespace tune::train
