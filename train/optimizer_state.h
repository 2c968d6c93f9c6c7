// Optimizer states and updates over the flat buffers (docs/memory-model.md
// §2): AdamW (m, v), Lion (m), 8-bit Adam (uint8 codes + fp32 absmax per
// block, AdamW state for tensors under 4096 elements), Adafactor (row and
// column statistics per matrix, full second moment per vector), LOMO (no
// state: each gradient is applied the moment it exists). AdamW and Lion
// update a flat buffer's owned region in one backend call, with its norm
// weights and biases undecayed; the others one call per tensor piece, so
// decay applies to matrices only. Under ZeRO (stage 1+)
// a rank updates the piece of each tensor inside its shard, with states laid
// out like the shard; Adafactor completes its sums over ranks (§2).
#pragma once

#include <cstdint>
#include <vector>

#include "core/config.h"
#include "core/optimizer_hyperparameters.h"
#include "kernels/backend.h"
#include "train/comm/comm.h"
#include "train/memory/memory.h"
#include "train/model_state.h"

namespace tune::train {

// core/optimizer_hyperparameters in the kernels' fp32.
struct OptimizerHyper {
    float lr = 1e-4f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, weight_decay = 0.0f;
    std::int64_t block = 256;
};
OptimizerHyper optimizer_hyper(const TrialConfig& c);

// Under offload the states live in host memory and the update runs there,
// on the model's host backend (ZeRO-Offload's CPU Adam): it updates the fp32
// master in place, and the device casts each owned region to its weights,
// reading the master through the unified address space (DeepSpeed's
// stage_1_and_2.py copies the updated partition back the same way).
class OptimizerState {
public:
    // backend and memory: the device's; the model's HostPlacement says where offload moves them.
    OptimizerState(kernels::Backend& backend, Allocator& memory, Comm& comm, const TrialConfig& config,
                   ModelState& model);

    // What multiplies each gradient first: `factor` (clip coefficient / loss
    // scale), times `*multiplier` where set (in memory of the backend that
    // updates: the device's kernels::Backend::gradient_multiplier output).
    struct GradScale {
        float factor = 1.0f;
        const float* multiplier = nullptr;
    };
    // Which update this is, counted from 1: `value`, or where set `device`, the
    // count in the updating backend's memory, read when the update runs.
    struct StepCount {
        std::int64_t value = 1;
        const std::int32_t* device = nullptr;
    };
    // One update of every owned piece from the gradient buffer.
    void step(GradScale scale, StepCount step);
    // Whether a graph may record the update once and replay it (core/replayed_update.h):
    // an optimizer that reads its step on the device, updating on the device.
    bool replayable() const;
    // LOMO: apply one tensor's whole gradient (numel elements in the weights'
    // dtype, averaged over ranks) to the piece this rank owns.
    void apply_sgd(std::size_t buffer, std::size_t tensor, const void* grad, float grad_scale);

private:
    // The elements of one tensor this rank updates.
    struct Piece {
        std::int64_t begin = 0;    // first element within the tensor
        std::int64_t n = 0;        // how many (0: the tensor lies outside the shard)
        std::int64_t element = 0;  // whole-buffer index of the first
        std::int64_t region = 0;   // its offset in the rank's region (states are laid out like it)
    };
    Piece piece(std::size_t buffer, std::size_t tensor) const;
    kernels::ParamTensor param_tensor(std::size_t buffer, std::size_t tensor, const Piece& piece, const void* grad,
                                      GradScale scale) const;
    void update(std::size_t buffer, std::size_t tensor, const Piece& piece, const kernels::ParamTensor& p,
                StepCount step);
    kernels::AdafactorPiece adafactor_piece(std::size_t buffer, std::size_t tensor, const Piece& piece,
                                            const kernels::ParamTensor& p) const;
    kernels::AdafactorParams adafactor_params(std::int64_t step) const;
    // AdamW, Lion: the buffer's owned region in one call.
    void update_buffer(std::size_t buffer, GradScale scale, StepCount step);
    // Adafactor over shards: every tensor of the buffer in three passes and two all-reduces.
    void adafactor_sharded(std::size_t buffer, GradScale scale, std::int64_t step);
    std::size_t slot(std::size_t buffer, std::size_t tensor) const;
    void* state_at(const Buffer& b, std::int64_t element, std::uint64_t element_bytes) const;

    kernels::Backend& backend_;  // runs the update: the host backend under offload
    kernels::Backend& device_;
    Allocator& memory_;
    Comm& comm_;
    ModelState& model_;
    bool weights_apart_ = false;  // the update writes the master; the device then casts it to the weights
    Optimizer kind_;
    OptimizerHyper hyper_;
    bool sharded_ = false;  // stage 1+ over more than one rank
    // Per flat buffer; which ones exist depends on the optimizer.
    std::vector<Buffer> m_, v_, absmax_m_, absmax_v_, small_m_, small_v_, stats_;
    // Per buffer and tensor: element offset into small_m_/small_v_ (8-bit Adam) or stats_ (Adafactor).
    std::vector<std::int64_t> small_offset_, stats_offset_;
};

}  // namespace tune::train
