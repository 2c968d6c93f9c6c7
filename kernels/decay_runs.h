// A call over many tensors of a flat buffer (ParamTensor::undecayed) as runs
// of one weight decay each: how a backend without a kernel of its own for it
// splits the call, and how the CUDA backend cuts it into launches.
#pragma once

#include <cstdint>

#include "kernels/backend.h"
#include "kernels/dtype.h"

namespace tune::kernels {

// f(begin, end, decay) for each run, in order, covering [0, t.n).
template <class F>
void for_each_decay_run(const ParamTensor& t, F&& f) {
    std::int64_t at = 0;
    for (std::int64_t k = 0; k < t.undecayed_count; ++k) {
        const ElementRange r = t.undecayed[k];
        if (r.begin > at) f(at, r.begin, t.decay);
        f(r.begin, r.end, false);
        at = r.end;
    }
    if (at < t.n) f(at, t.n, t.decay);
}

// `elements` further into a buffer of dtype `t` (nullptr stays nullptr).
inline const void* advance(const void* p, DType t, std::int64_t elements) {
    return p == nullptr ? nullptr
                        : static_cast<const unsigned char*>(p) + elements * static_cast<std::int64_t>(dtype_bytes(t));
}
inline void* advance(void* p, DType t, std::int64_t elements) {
    return const_cast<void*>(advance(static_cast<const void*>(p), t, elements));
}

// Elements [begin, end) of t as one tensor of one decay.
inline ParamTensor slice(const ParamTensor& t, std::int64_t begin, std::int64_t end, bool decay) {
    ParamTensor s = t;
    s.n = end - begin;
    s.param = advance(t.param, t.param_dtype, begin);
    s.grad = advance(t.grad, t.grad_dtype, begin);
    s.param_copy = advance(t.param_copy, t.copy_dtype, begin);
    s.decay = decay;
    s.undecayed = nullptr, s.undecayed_count = 0;
    return s;
}

}  // namespace tune::kernels
