// The element loop the element-wise optimizers share: p and g (times
// grad_scale) read as fp32, the rule updates p and its states at indices
// [i, i + W), then p and the optional low-precision copy are stored. A thread
// steps by packs of 8 elements with 16-byte accesses (kernels/cuda/packs.cuh)
// where every buffer the call touches is 16-byte aligned at the stretch's
// start, else by single elements; the stretch's tail goes one by one.
//
// A call over a run of tensors (ParamTensor::undecayed) is one launch for up
// to kDecayRanges undecayed ranges: the ranges travel by value in the kernel's
// arguments, and each thread walks them with a cursor, since its indices only
// grow. A flat buffer of a Llama layer has two (its norms).
//
// A rule is `template <int W> void operator()(float (&p)[W], const float (&g)[W],
// std::int64_t i, const bool (&decay)[W]) const` on the device, and
// `bool packs_at(std::int64_t i) const` on the host: whether its own buffers
// are 16-byte aligned at element i, and `Rule at_launch() const` on the
// device: the rule with what it reads from device memory once per thread
// (AdamW's step, so a launch replayed from a graph sees the step it runs at).
#pragma once

#include <algorithm>

#include "kernels/backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/packs.cuh"
#include "kernels/op_checks.h"

namespace tune::kernels::cuda {

inline void check_param(const ParamTensor& t, const char* op) {
    require(t.n >= 0 && (t.n == 0 || (t.param != nullptr && t.grad != nullptr)), op, "null tensor");
    require(is_float(t.param_dtype) && is_float(t.grad_dtype), op, "param and grad must be float storage");
    require(t.param_copy == nullptr || is_float(t.copy_dtype), op, "copy must be float storage");
    check_undecayed(t, "cuda", op);
}

// What multiplies each gradient: grad_scale, times the device's multiplier where there is one.
__device__ __forceinline__ float grad_scale_of(const ParamTensor& t) {
    return t.grad_multiplier != nullptr ? t.grad_scale * *t.grad_multiplier : t.grad_scale;
}

inline constexpr int kDecayRanges = 16;

// The undecayed ranges of one launch's stretch [begin, end) of the tensor.
struct DecayRanges {
    std::int64_t begin = 0, end = 0;
    int count = 0;
    ElementRange r[kDecayRanges];
};

// Elements [i, i + W) of the stretch; `next` is the thread's cursor into the ranges.
template <int W, class Rule>
__device__ __forceinline__ void update_at(const ParamTensor& t, const DecayRanges& r, const Rule& rule, std::int64_t i,
                                          float scale, int& next) {
    float p[W], g[W];
    bool decay[W];
    load_w<W>(t.param, t.param_dtype, i, p);
    load_w<W>(t.grad, t.grad_dtype, i, g);
    for (int j = 0; j < W; ++j) {
        g[j] *= scale;
        while (next < r.count && r.r[next].end <= i + j) ++next;
        decay[j] = t.decay && !(next < r.count && r.r[next].begin <= i + j);
    }
    rule(p, g, i, decay);
    store_w<W>(t.param, t.param_dtype, i, p);
    if (t.param_copy != nullptr) store_w<W>(t.param_copy, t.copy_dtype, i, p);
}

// Every element of the stretch: `packs` packs from its start, then the rest one by one.
template <class Rule>
__global__ void update_params_kernel(ParamTensor t, DecayRanges ranges, Rule rule, std::int64_t packs) {
    int next = 0;  // the first range that does not end at or before the thread's index
    const float scale = grad_scale_of(t);
    const Rule r = rule.at_launch();
    const std::int64_t rest = ranges.begin + packs * kPack;
    TUNE_GRID_STRIDE(k, packs) update_at<kPack>(t, ranges, r, ranges.begin + k * kPack, scale, next);
    TUNE_GRID_STRIDE(k, ranges.end - rest) update_at<1>(t, ranges, r, rest + k, scale, next);
}

// Whether the call's own buffers are 16-byte aligned at element i.
inline bool packs_at(const ParamTensor& t, std::int64_t i) {
    return aligned16(t.param, t.param_dtype, i) && aligned16(t.grad, t.grad_dtype, i) &&
           aligned16(t.param_copy, t.copy_dtype, i);
}

// One launch per kDecayRanges undecayed ranges (one launch for a single tensor).
template <class Rule>
void update_params(cudaStream_t stream, const ParamTensor& t, Rule rule) {
    if (t.n == 0) return;
    ParamTensor plain = t;
    plain.undecayed = nullptr, plain.undecayed_count = 0;  // host memory: not for the device
    std::int64_t first = 0;
    do {
        DecayRanges d;
        d.begin = first == 0 ? 0 : t.undecayed[first].begin;
        d.count = static_cast<int>(std::min<std::int64_t>(kDecayRanges, t.undecayed_count - first));
        std::copy_n(t.undecayed + first, d.count, d.r);
        first += d.count;
        d.end = first < t.undecayed_count ? t.undecayed[first].begin : t.n;
        const std::int64_t n = d.end - d.begin;
        const std::int64_t packs = packs_at(t, d.begin) && rule.packs_at(d.begin) ? n / kPack : 0;
        TUNE_LAUNCH(update_params_kernel, pack_grid(n, packs), kThreads, 0, stream)(plain, d, rule, packs);
        TUNE_CUDA_CHECK_LAUNCH("update_params_kernel");
    } while (first < t.undecayed_count);
}

}  // namespace tune::kernels::cuda
