// The descriptors of one cuDNN operation graph while it is built and for as
// long as it is used: tensors, the settings operations name (pointwise,
// matmul, reduction) and the operations, each finalized as it is made.
// Operations hold their tensors' addresses, so every part stays where it was made.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "kernels/cuda/host/cudnn_descriptor.h"

namespace tune::kernels::cuda::cudnn {

// Dimensions and strides of a 4-D tensor, outermost first.
using Shape = std::vector<std::int64_t>;

class GraphParts {
public:
    explicit GraphParts(const CudnnApi& api) : api_(&api) {}

    // A tensor the caller binds (uid > 0) or a virtual one (uid 0: the graph numbers it).
    // Each takes the caller's line, which a failure names.
    const Descriptor& tensor(DataType type, const Shape& dims, const Shape& strides, std::int64_t uid = 0,
                             bool by_value = false, TensorReordering reordering = TensorReordering::none,
                             SourceLine where = SourceLine::here());
    // y = mode(x[, b][, t]); `axis` for GEN_INDEX.
    const Descriptor& pointwise(PointwiseMode mode, DataType compute, const Descriptor& x, const Descriptor* b,
                                const Descriptor& y, const Descriptor* t = nullptr, std::int64_t axis = -1,
                                SourceLine where = SourceLine::here());
    // fp32 accumulation
    void matmul(const Descriptor& a, const Descriptor& b, const Descriptor& c, SourceLine where = SourceLine::here());
    void reduction(ReductionOperator op, const Descriptor& x, const Descriptor& y,
                   SourceLine where = SourceLine::here());
    // y views x's elements with its own strides
    void reshape(const Descriptor& x, const Descriptor& y, SourceLine where = SourceLine::here());

    // The operation descriptors in the order made, for CUDNN_ATTR_OPERATIONGRAPH_OPS.
    std::vector<void*> operations() const;
    const CudnnApi& api() const { return *api_; }

private:
    const CudnnApi* api_;
    std::int64_t next_virtual_uid_ = 1000;
    std::deque<Descriptor> tensors_;
    std::deque<Descriptor> settings_;
    std::deque<Descriptor> operations_;
};

}  // namespace tune::kernels::cuda::cudnn
