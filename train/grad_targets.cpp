#include "train/grad_targets.h"

#include <algorithm>
#include <utility>

namespace tune::train {

namespace {

std::uint64_t bytes_of(std::int64_t elements, kernels::DType dt) {
    return static_cast<std::uint64_t>(elements) * kernels::dtype_bytes(dt);
}

void* at(void* base, std::int64_t element, kernels::DType dt) {
    return static_cast<char*>(base) + bytes_of(element, dt);
}

}  // namespace

void UnwrittenTensors::mark(std::size_t buffer, std::size_t tensors) {
    if (unwritten_.size() <= buffer) unwritten_.resize(buffer + 1);
    unwritten_[buffer].assign(tensors, 1);
}

bool UnwrittenTensors::take(std::size_t buffer, std::size_t t) {
    if (buffer >= unwritten_.size() || t >= unwritten_[buffer].size()) return false;
    return std::exchange(unwritten_[buffer][t], 0) != 0;
}

void UnwrittenTensors::zero_rest(kernels::Backend& backend, std::size_t buffer, void* base, const FlatLayout& f,
                                 kernels::DType dt) {
    for (std::size_t t = 0; t < f.tensors.size(); ++t)
        if (take(buffer, t)) zero_tensor(backend, base, f, t, dt);
}

void zero_tensor(kernels::Backend& backend, void* base, const FlatLayout& f, std::size_t t, kernels::DType dt) {
    backend.fill_zero(at(base, f.tensors[t].offset, dt), bytes_of(f.tensors[t].numel(), dt));
}

void zero_padding(kernels::Backend& backend, void* base, const FlatLayout& f, kernels::DType dt) {
    std::vector<std::pair<std::int64_t, std::int64_t>> spans;  // [begin, end) of each tensor
    for (const TensorView& t : f.tensors) spans.emplace_back(t.offset, t.offset + t.numel());
    std::sort(spans.begin(), spans.end());
    std::int64_t next = 0;  // the first element no tensor before it holds
    for (const auto& [begin, end] : spans) {
        if (begin > next) backend.fill_zero(at(base, next, dt), bytes_of(begin - next, dt));
        next = std::max(next, end);
    }
    if (f.padded > next) backend.fill_zero(at(base, next, dt), bytes_of(f.padded - next, dt));
}

}  // namespace tune::train
