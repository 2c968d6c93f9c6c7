// QLoRA's frozen base (Dettmers et al. 2023): each layer's flat buffer stored
// as NF4 with double-quantized absmax (kernels/math/nf4.h), its vectors (the
// RMSNorm weights and any biases) kept in the weights' dtype, as bitsandbytes'
// Linear4bit keeps its bias (4-bit norms would move every activation), and the outer buffer (embedding, final norm, LM
// head) in the weights' dtype, as bitsandbytes leaves them. At ZeRO stage 3 each rank keeps its shard of every layer's
// NF4 storage (whole absmax groups, math::nf4_shard) and of the outer buffer, gathered before each use; the vectors
// stay whole. docs/memory-model.md §9.
#pragma once

#include <cstdint>
#include <vector>

#include "core/offload_plan.h"
#include "core/zero_plan.h"
#include "kernels/backend.h"
#include "train/comm/comm.h"
#include "train/memory/memory.h"
#include "train/model_state.h"
#include "train/param_layout.h"

namespace tune::train {

// What LlamaLayer reads for one QLoRA layer (passed as its `weights` pointer).
struct QuantizedLayer {
    const void* nf4 = nullptr;  // math::nf4_sizes(n) bytes over the layer buffer, n >= its padded length
    const void* vectors =
        nullptr;  // the layer's vectors in slot order, in the weights' dtype (ParamLayout::vector_offset)
    std::int64_t n = 0;
};

class QuantizedBase {
public:
    // host: where the storage lives when offload keeps parameters on the host
    // (core/offload_plan.h); the device's kernels read its vectors there.
    QuantizedBase(kernels::Backend& backend, Allocator& memory, const ParamLayout& layout, kernels::DType dtype,
                  const ZeroPlan& zero, Comm& comm, HostPlacement host = {});
    // Quantizes the layers of `host` (fp32, laid out by the layout) on the
    // device and keeps the outer buffer and the vectors in the weights' dtype
    // (at stage 3 only this rank's shards).
    void upload(const HostParams& host);
    bool sharded() const { return zero_.gathers_weights_before_use(); }

    // Whole storage (below stage 3): the layer as the model reads it, and the outer buffer.
    const QuantizedLayer* layer(std::size_t i) const { return &layers_[i]; }
    void* outer() const { return outer_.get(); }

    // Stage 3: a layer's NF4 storage gathered from every rank's shard into a
    // comm buffer, which `view` reads until `storage` is freed.
    struct Gathered {
        Buffer storage;
        QuantizedLayer view;
    };
    Gathered gather_layer(std::size_t i);
    // Stage 3: the outer buffer gathered (padded, weights' dtype, tag comm).
    Buffer gather_outer();

private:
    void upload_layer_shard(std::size_t i, const void* whole);

    kernels::Backend& backend_;
    kernels::Backend& storage_backend_;  // the host's where the storage is on the host
    Allocator& memory_;
    const ParamLayout& layout_;
    kernels::DType dt_;
    ZeroPlan zero_;
    Comm& comm_;
    std::int64_t kept_ = 0;  // NF4 weights of a layer this rank keeps: the padded layer, or its shard
    std::vector<Buffer> nf4_, vectors_;
    std::vector<QuantizedLayer> layers_;
    Buffer outer_;
};

}  // namespace tune::train
