// A micro-batch's forward and backward as CUDA graphs. On a GPU each of a
// step's few thousand launches costs the host microseconds; a graph launches
// them as one. A micro-batch's launches are the same every time it starts
// from the same gradient marks (which tensors it writes with beta 0): the
// step's first micro-batch, and each later one. Each is run eagerly once
// (its GEMMs' and attention's first calls choose their plans, which waits for
// the device), recorded the second time and replayed from then on.
// Replayed kernels read the pointers they were recorded with, so the
// micro-batch's buffers live in one arena at fixed offsets, planned from the
// ledger trace of the first eager run (train/memory/arena.h); every kind
// takes the same places, since their requests are the same. The host's
// side of a replay is done again by hand: the ledger counts the recorded
// trace, and the gradient marks are set to what the recording left.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/config.h"
#include "kernels/backend.h"
#include "train/grad_targets.h"
#include "train/memory/memory.h"
#include "train/model_state.h"

namespace tune::train {

// Why the trial's micro-batches are not replayed, or nothing where they are: the one rule. Not where
// the backend has no graphs; where a micro-batch gathers or reduce-scatters (ZeRO-3's weights, ZeRO-2's
// buckets, and so offload, which runs at those stages only; tensor parallelism), where a kernel's
// arguments change between micro-batches (NEFTune's seed, fp16's loss scale), nor under LOMO, whose
// update runs inside backward.
std::optional<std::string> micro_batch_graphs_off(const TrialConfig& c, const kernels::Backend& backend);

class MicroBatchGraphs {
public:
    // trained: the state whose gradient marks a micro-batch takes (ModelState::unwritten).
    MicroBatchGraphs(kernels::Backend& backend, Allocator& memory, ModelState& trained);
    ~MicroBatchGraphs();
    MicroBatchGraphs(const MicroBatchGraphs&) = delete;
    MicroBatchGraphs& operator=(const MicroBatchGraphs&) = delete;

    // One micro-batch: `ops` queues its work and allocates only from `memory`, freeing it all, and
    // leaves nothing for the host to do after it that a replay would skip.
    void run(const std::function<void()>& ops);
    std::uint64_t launches() const { return launches_; }
    // Why recording stopped (a capture that failed, named by the backend), or nothing.
    const std::optional<std::string>& stopped() const { return stopped_; }

private:
    struct Recorded {
        UnwrittenTensors before, after;  // the marks it starts from and leaves
        bool ran_eagerly = false;
        std::unique_ptr<kernels::OpGraph> graph;
        LedgerTrace trace;
    };
    Recorded& entry_for(const UnwrittenTensors& marks);
    void record(Recorded& r, const std::function<void()>& ops);
    void reserve_arena();
    void release_arena() noexcept;

    kernels::Backend& backend_;
    Allocator& memory_;
    ModelState& trained_;
    std::vector<Recorded> recorded_;
    LedgerTrace planned_;  // the first eager run's trace
    ArenaPlan plan_;       // its buffers' places, once the arena is reserved
    void* arena_ = nullptr;
    std::uint64_t launches_ = 0;
    std::optional<std::string> stopped_;
};

}  // namespace tune::train
