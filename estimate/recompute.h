// What a checkpointing mode runs again before a layer's backward
// (train/model.cpp LlamaLayer::recompute): the one rule every time term
// (estimate/estimate_time.cpp) and the tensor-parallel schedule
// (estimate/tensor_parallel_calls.cpp) read.
#pragma once

#include "core/config.h"
#include "estimate/model_flops.h"

namespace tune {

struct Recomputed {
    bool attention = false;    // the attention forward: selective and full (flash's selective: see flops_per_token)
    bool linears = false;      // every linear's forward but the down projection's base GEMM: full
    bool op_linears = false;   // the linears selective-op does not keep (Linear::op_recomputed)
    bool elementwise = false;  // the layer's element-wise forward: full, and selective-op counted whole

    // Whether this linear's base GEMM runs again.
    bool reruns(const Linear& l) const { return (linears && !l.down) || (op_linears && l.op_recomputed); }
};

inline Recomputed recomputed(Checkpointing mode) {
    switch (mode) {
        case Checkpointing::none:
            return {};
        case Checkpointing::selective:
            return {.attention = true};
        case Checkpointing::full:
            return {.attention = true, .linears = true, .elementwise = true};
        case Checkpointing::selective_op:
            return {.op_linears = true, .elementwise = true};
    }
    return {};
}

}  // namespace tune
