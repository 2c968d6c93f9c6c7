// QLoRA's frozen base (Dettmers et al. 2023): each layer's flat buffer stored
// as NF4 with double-quantized absmax (kernels/math/nf4.h), its two RMSNorm
// weight vectors kept in the weights' dtype (4-bit norms would move every
// activation), and the outer buffer (embedding, final norm, LM head) in the
// weights' dtype, as bitsandbytes leaves them. docs/memory-model.md §9.
#pragma once

#include <cstdint>
#include <vector>

#include "harness/memory.h"
#include "harness/model_state.h"
#include "harness/param_layout.h"
#include "kernels/backend.h"

namespace tune::harness {

// What LlamaLayer reads for one QLoRA layer (passed as its `weights` pointer).
struct QuantizedLayer {
    const void* nf4 = nullptr;    // math::nf4_sizes(n) bytes over the padded layer buffer of n elements
    const void* norms = nullptr;  // (2, h): attn_norm, mlp_norm in the weights' dtype
    std::int64_t n = 0;
};

class QuantizedBase {
public:
    QuantizedBase(kernels::Backend& backend, Allocator& memory, const ParamLayout& layout, kernels::DType dtype);
    // Quantizes the layers of `host` (fp32, laid out by the layout) on the
    // device and keeps the outer buffer and the norms in the weights' dtype.
    void upload(const HostParams& host);
    const QuantizedLayer* layer(std::size_t i) const { return &layers_[i]; }
    void* outer() const { return outer_.get(); }

private:
    kernels::Backend& backend_;
    const ParamLayout& layout_;
    kernels::DType dt_;
    std::vector<Buffer> nf4_, norms_;
    std::vector<QuantizedLayer> layers_;
    Buffer outer_;
};

}  // namespace tune::harness
