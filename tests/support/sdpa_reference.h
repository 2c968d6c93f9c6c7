// The CPU backend's flash attention as the reference for cuDNN's attention
// graphs (tests/test_cudnn_graph.cpp on the stand-in, tests/gpu on a device):
// q, k and v as column blocks of one fused row of 16-bit values, the layout
// the trainer uses, and the pointers and by-value scalars each graph binds.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <utility>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cuda/host/sdpa_graph.h"
#include "tests/backend_test_util.h"

namespace tune::testing {

inline kernels::cuda::cudnn::SdpaLayout sdpa_layout(kernels::DType dtype, std::int64_t heads, std::int64_t kv_heads,
                                                    std::int64_t seq) {
    kernels::cuda::cudnn::SdpaLayout l;
    l.batch = 2, l.heads = heads, l.kv_heads = kv_heads, l.seq = seq, l.head_dim = 64, l.dtype = dtype;
    l.q_stride = l.k_stride = l.v_stride = (heads + 2 * kv_heads) * l.head_dim;
    l.o_stride = l.dout_stride = heads * l.head_dim;
    return l;
}

// Element offsets of k and v within a fused row.
inline std::int64_t k_column(const kernels::cuda::cudnn::SdpaLayout& l) { return l.heads * l.head_dim; }
inline std::int64_t v_column(const kernels::cuda::cudnn::SdpaLayout& l) { return (l.heads + l.kv_heads) * l.head_dim; }

// Normal values rounded to the layout's 16-bit type.
inline std::vector<std::uint16_t> random_16bit(std::size_t n, kernels::DType dtype, unsigned seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> values(n);
    for (float& v : values) v = normal(rng);
    return to_storage(values, dtype);
}

struct SdpaBuffers {
    std::vector<std::uint16_t> qkv, out;  // (B, S, q_stride), (B, S, o_stride)
    std::vector<float> lse;               // (B, H, S)
};

// The backend's arguments for fused attention over a fused qkv buffer.
inline kernels::AttentionForwardArgs sdpa_forward_args(const kernels::cuda::cudnn::SdpaLayout& l,
                                                       const std::uint16_t* qkv, void* out, float* lse) {
    using namespace kernels;
    return AttentionForwardArgs{.shape = {l.batch, l.seq, l.heads, l.kv_heads, l.head_dim},
                                .kind = AttentionKind::fused,
                                .dtype = l.dtype,
                                .q = qkv,
                                .k = qkv + k_column(l),
                                .v = qkv + v_column(l),
                                .q_stride = l.q_stride,
                                .k_stride = l.k_stride,
                                .v_stride = l.v_stride,
                                .out = out,
                                .out_stride = l.o_stride,
                                .lse = lse};
}

// Its backward from `fwd`'s output and log-sum-exp, dQ, dK and dV into `grads` shaped like qkv.
inline kernels::AttentionBackwardArgs sdpa_backward_args(const kernels::cuda::cudnn::SdpaLayout& l,
                                                         const SdpaBuffers& fwd, const std::uint16_t* dout,
                                                         std::uint16_t* grads) {
    using namespace kernels;
    const AttentionForwardArgs f = sdpa_forward_args(l, fwd.qkv.data(), nullptr, nullptr);
    AttentionBackwardArgs b;
    b.shape = f.shape, b.kind = f.kind, b.dtype = f.dtype, b.q = f.q, b.k = f.k, b.v = f.v;
    b.q_stride = l.q_stride, b.k_stride = l.k_stride, b.v_stride = l.v_stride;
    b.out = fwd.out.data(), b.lse = fwd.lse.data(), b.out_stride = l.o_stride;
    b.dout = dout, b.dout_stride = l.dout_stride;
    b.dq = grads, b.dk = grads + k_column(l), b.dv = grads + v_column(l);
    return b;
}

inline SdpaBuffers sdpa_cpu_forward(const kernels::cuda::cudnn::SdpaLayout& l, std::vector<std::uint16_t> qkv) {
    kernels::CpuBackend cpu;
    SdpaBuffers b{std::move(qkv), std::vector<std::uint16_t>(l.batch * l.seq * l.o_stride),
                  std::vector<float>(l.batch * l.heads * l.seq)};
    const kernels::AttentionForwardArgs a = sdpa_forward_args(l, b.qkv.data(), b.out.data(), b.lse.data());
    std::vector<float> ws(cpu.attention_workspace_bytes(a.shape, a.kind, a.dtype) / 4 + 1);
    cpu.attention_forward(a, kernels::Workspace{ws.data(), ws.size() * 4});
    return b;
}

// dQ, dK and dV for `dout`, into one buffer shaped like qkv.
inline std::vector<std::uint16_t> sdpa_cpu_backward(const kernels::cuda::cudnn::SdpaLayout& l, const SdpaBuffers& fwd,
                                                    const std::vector<std::uint16_t>& dout) {
    kernels::CpuBackend cpu;
    std::vector<std::uint16_t> grads(fwd.qkv.size());
    const kernels::AttentionBackwardArgs b = sdpa_backward_args(l, fwd, dout.data(), grads.data());
    std::vector<float> ws(cpu.attention_workspace_bytes(b.shape, b.kind, b.dtype) / 4 + 1);
    cpu.attention_backward(b, kernels::Workspace{ws.data(), ws.size() * 4});
    return grads;
}

// The by-value scalars both graphs bind: the scale, the masked value and one.
struct SdpaScalars {
    float scale, masked = std::numeric_limits<float>::lowest(), one = 1.0f;
    explicit SdpaScalars(const kernels::cuda::cudnn::SdpaLayout& l)
        : scale(1.0f / std::sqrt(static_cast<float>(l.head_dim))) {}
};

// The (id, pointer) pairs of a graph's tensors, from the base of each buffer.
struct SdpaBinding {
    std::vector<std::int64_t> uids;
    std::vector<void*> pointers;
    void bind(kernels::cuda::cudnn::SdpaTensor t, void* p) {
        uids.push_back(static_cast<std::int64_t>(t));
        pointers.push_back(p);
    }
};

inline SdpaBinding sdpa_forward_binding(const kernels::cuda::cudnn::SdpaLayout& l, void* qkv, void* out, void* lse,
                                        SdpaScalars& s) {
    using T = kernels::cuda::cudnn::SdpaTensor;
    auto* base = static_cast<std::uint16_t*>(qkv);
    SdpaBinding b;
    b.bind(T::q, base);
    b.bind(T::k, base + k_column(l));
    b.bind(T::v, base + v_column(l));
    b.bind(T::o, out);
    b.bind(T::stats, lse);
    b.bind(T::scale, &s.scale);
    b.bind(T::masked_value, &s.masked);
    return b;
}

inline SdpaBinding sdpa_backward_binding(const kernels::cuda::cudnn::SdpaLayout& l, void* qkv, void* out, void* lse,
                                         void* dout, void* grads, void* dq_accumulator, SdpaScalars& s) {
    using T = kernels::cuda::cudnn::SdpaTensor;
    SdpaBinding b = sdpa_forward_binding(l, qkv, out, lse, s);
    auto* g = static_cast<std::uint16_t*>(grads);
    b.bind(T::dout, dout);
    b.bind(T::dq, g);
    b.bind(T::dk, g + k_column(l));
    b.bind(T::dv, g + v_column(l));
    b.bind(T::one, &s.one);
    b.bind(T::dq_accumulator, dq_accumulator);
    return b;
}

}  // namespace tune::testing
