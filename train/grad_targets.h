// Gradient buffers written before they are added to. A step's first op to
// reach a tensor's gradient writes it whole (a GEMM with beta = 0) instead of
// adding into a buffer zeroed for it, which for full training of a 7B model
// saves a 13.5 GB memset per step. An op that only adds (a norm's dw, the
// embedding's rows) zeroes its tensor first, and what no op wrote is zeroed
// before the gradients are read. The padding between a flat buffer's tensors
// stays zero: it is zeroed once, and the collectives only sum zeros there.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/backend.h"
#include "train/param_layout.h"

namespace tune::train {

// Where one op writes a tensor's gradient. fresh: nothing of this step is there
// yet, and the op writes every element (beta 0); else it adds (beta 1).
struct GradTarget {
    void* ptr = nullptr;
    bool fresh = false;
    float beta() const { return fresh ? 0.0f : 1.0f; }
};

// Which tensors of which flat buffers no op has written since they were marked.
class UnwrittenTensors {
public:
    void mark(std::size_t buffer, std::size_t tensors);  // every tensor of `buffer` unwritten
    // Whether tensor t of `buffer` was unwritten; it counts as written from now on.
    bool take(std::size_t buffer, std::size_t t);
    // Zeroes each tensor of `buffer` still unwritten, in the buffer starting at `base`.
    void zero_rest(kernels::Backend& backend, std::size_t buffer, void* base, const FlatLayout& f, kernels::DType dt);
    bool operator==(const UnwrittenTensors&) const = default;

private:
    std::vector<std::vector<char>> unwritten_;  // [buffer][tensor]
};

// Tensor t of a flat buffer starting at base, zeroed.
void zero_tensor(kernels::Backend& backend, void* base, const FlatLayout& f, std::size_t t, kernels::DType dt);
// Every element of the flat buffer outside its tensors, zeroed (the slots' padding and the shards' tail).
void zero_padding(kernels::Backend& backend, void* base, const FlatLayout& f, kernels::DType dt);

}  // namespace tune::train
