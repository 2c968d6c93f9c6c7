// Collectives over flat device buffers, behind one small interface so the
// trainer is the same on one rank, under MPI (CPU) and under NCCL (GPUs).
// Buffers are whole flat buffers of `count` elements; shard operations split
// them in world_size() equal parts (count must be a multiple of world_size()),
// rank r owning part r.
#pragma once

#include <cstdint>
#include <memory>

#include "kernels/dtype.h"

namespace tune::train {

// max: the vocabulary-parallel cross-entropy's row maxima (kernels/lm_head_loss.h RowCombine).
enum class ReduceOp : std::uint8_t { sum, average, max };

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
    std::uint64_t bytes_moved() const override { return 0; }
};

}  // namespace tune::train
