// Attention cases: grouped KV heads reading q, k, v as column blocks of one
// fused QKV buffer, and separate tensors with plain heads, for eager
// (materialized) and flash (fused) attention. The backward case runs the
// forward first on the same backend, for its probabilities or lse. The
// "flash vs eager" cases run flash on the backend under test and eager on
// the CPU reference, comparing outputs and gradients across implementations.
#include <fmt/format.h>

#include "kernels/selftest/case_builder.h"
#include "kernels/selftest/cases.h"

namespace tune::kernels::selftest {

namespace {

struct AttentionCase {
    AttentionShape shape;
    bool fused_qkv;  // q, k, v are column blocks of one (N, (H + 2 KVH) D) buffer
    AttentionKind kind = AttentionKind::materialized;
};

// What a case's run function uses on backend `be`: the case's kind, or for a
// flash-vs-eager case eager on the CPU reference and flash elsewhere.
AttentionKind kind_on(const Backend& be, AttentionKind kind, bool against_eager) {
    if (against_eager) return be.name() == "cpu" ? AttentionKind::materialized : AttentionKind::fused;
    return kind;
}

// What attention keeps for backward: (B, H, S, S) probabilities in t for eager,
// (B, H, S) fp32 lse for flash; an output only when both backends run one kind.
std::size_t kept_tensor(CaseBuilder& cb, const AttentionShape& s, DType t, AttentionKind kind, bool against_eager,
                        bool output) {
    const std::int64_t rows = s.batch * s.heads * s.seq;
    if (against_eager) return cb.values("kept", DType::f32, std::vector<float>(rows * s.seq, 0.0f));  // fits either
    if (kind == AttentionKind::fused)
        return output ? cb.zero_output("lse", DType::f32, rows, OpClass::matmul)
                      : cb.values("lse", DType::f32, std::vector<float>(rows, 0.0f));
    return output ? cb.zero_output("probs", t, rows * s.seq, OpClass::matmul)
                  : cb.values("probs", t, std::vector<float>(rows * s.seq, 0.0f));
}

// Forward arguments over the case's tensors (qkv index, or q/k/v indices).
struct Layout {
    std::size_t q, k, v;
    std::int64_t q_off, k_off, v_off, q_stride, k_stride, v_stride;
};

Layout layout_of(const AttentionCase& c, std::size_t q, std::size_t k, std::size_t v) {
    const AttentionShape& s = c.shape;
    const std::int64_t qw = s.heads * s.head_dim, kw = s.kv_heads * s.head_dim;
    if (c.fused_qkv) return {q, q, q, 0, qw, qw + kw, qw + 2 * kw, qw + 2 * kw, qw + 2 * kw};
    return {q, k, v, 0, 0, 0, qw, kw, kw};
}

const void* offset(const DeviceTensors& d, std::size_t i, std::int64_t elements, DType t) {
    return static_cast<const char*>(d[i]) + elements * static_cast<std::int64_t>(dtype_bytes(t));
}

AttentionForwardArgs forward_args(const AttentionCase& c, AttentionKind kind, const Layout& l, DType t,
                                  const DeviceTensors& d, std::size_t out, std::size_t kept) {
    AttentionForwardArgs a;
    a.shape = c.shape;
    a.kind = kind;
    a.dtype = t;
    a.q = offset(d, l.q, l.q_off, t), a.k = offset(d, l.k, l.k_off, t), a.v = offset(d, l.v, l.v_off, t);
    a.q_stride = l.q_stride, a.k_stride = l.k_stride, a.v_stride = l.v_stride;
    a.out = d[out], a.out_stride = c.shape.heads * c.shape.head_dim;
    if (kind == AttentionKind::fused)
        a.lse = static_cast<float*>(d[kept]);
    else
        a.probs = d[kept];
    return a;
}

std::string label(const AttentionCase& c, bool against_eager) {
    const AttentionShape& s = c.shape;
    const char* kind = against_eager ? " flash vs eager" : (c.kind == AttentionKind::fused ? " flash" : "");
    return fmt::format("B={} S={} H={} KVH={} D={}{}{}", s.batch, s.seq, s.heads, s.kv_heads, s.head_dim,
                       c.fused_qkv ? " fused-qkv" : "", kind);
}

Case forward_case(const AttentionCase& c, DType t, bool against_eager = false) {
    return {"attention_forward", name_of(t), label(c, against_eager), [=](std::uint64_t seed) {
                CaseBuilder cb(seed);
                const AttentionShape& s = c.shape;
                const std::int64_t n = s.batch * s.seq;
                std::size_t q, k, v;
                if (c.fused_qkv) {
                    q = k = v = cb.normal("qkv", t, n * (s.heads + 2 * s.kv_heads) * s.head_dim);
                } else {
                    q = cb.normal("q", t, n * s.heads * s.head_dim);
                    k = cb.normal("k", t, n * s.kv_heads * s.head_dim);
                    v = cb.normal("v", t, n * s.kv_heads * s.head_dim);
                }
                const auto out = cb.zero_output("out", t, n * s.heads * s.head_dim, OpClass::matmul);
                const auto kept = kept_tensor(cb, s, t, c.kind, against_eager, true);
                const Layout l = layout_of(c, q, k, v);
                return cb.build([=](Backend& be, DeviceTensors& d) {
                    const auto a = forward_args(c, kind_on(be, c.kind, against_eager), l, t, d, out, kept);
                    be.attention_forward(a, d.workspace(be.attention_workspace_bytes(s, a.kind, t)));
                });
            }};
}

// alias_dq: dq is written over dout (the trainer's in-place use; same stride).
Case backward_case(const AttentionCase& c, DType t, bool alias_dq, bool against_eager = false) {
    return {"attention_backward", name_of(t), label(c, against_eager) + (alias_dq ? " dq=dout" : ""),
            [=](std::uint64_t seed) {
                CaseBuilder cb(seed);
                const AttentionShape& s = c.shape;
                const std::int64_t n = s.batch * s.seq, qw = s.heads * s.head_dim, kw = s.kv_heads * s.head_dim;
                const auto q = cb.normal("q", t, n * qw);
                const auto k = cb.normal("k", t, n * kw);
                const auto v = cb.normal("v", t, n * kw);
                const auto dout = cb.normal("dout", t, n * qw);
                const auto out = cb.zero_output("out", t, n * qw, OpClass::matmul);
                const auto kept = kept_tensor(cb, s, t, c.kind, against_eager, false);
                if (alias_dq) cb.mark_output(dout, OpClass::matmul);
                const auto dq = alias_dq ? dout : cb.zero_output("dq", t, n * qw, OpClass::matmul);
                const auto dk = cb.zero_output("dk", t, n * kw, OpClass::matmul);
                const auto dv = cb.zero_output("dv", t, n * kw, OpClass::matmul);
                const AttentionCase plain{s, false, c.kind};
                const Layout l = layout_of(plain, q, k, v);
                return cb.build([=](Backend& be, DeviceTensors& d) {
                    const AttentionKind kind = kind_on(be, c.kind, against_eager);
                    const auto f = forward_args(plain, kind, l, t, d, out, kept);
                    const Workspace ws = d.workspace(be.attention_workspace_bytes(s, f.kind, t));
                    be.attention_forward(f, ws);
                    AttentionBackwardArgs b;
                    b.shape = s, b.kind = kind, b.dtype = t;
                    b.q = d[q], b.k = d[k], b.v = d[v];
                    b.q_stride = qw, b.k_stride = kw, b.v_stride = kw;
                    if (kind == AttentionKind::fused) {
                        b.lse = static_cast<const float*>(d[kept]);
                        b.out = d[out], b.out_stride = qw;
                    } else {
                        b.probs = d[kept];
                    }
                    b.dout = d[dout], b.dout_stride = qw;
                    b.dq = d[dq], b.dk = d[dk], b.dv = d[dv];
                    be.attention_backward(b, ws);
                });
            }};
}

}  // namespace

void add_attention_cases(std::vector<Case>& out) {
    // Contexts above 64 (more than one 64-wide tile, a ragged last one) and an odd one.
    const AttentionCase cases[] = {
        {{2, 64, 4, 2, 32}, true},
        {{1, 33, 2, 2, 16}, false},
        {{1, 130, 2, 1, 16}, false},
    };
    for (DType t : kFloatTypes)
        for (const auto& c : cases) {
            out.push_back(forward_case(c, t));
            out.push_back(backward_case(c, t, false));
        }
    for (DType t : kFloatTypes) out.push_back(backward_case(cases[0], t, true));
    // Many heads per KV head: dK and dV sum 16 heads' products, where a
    // 16-bit sum per head drifts from the CPU's one rounding; and S shorter
    // than D allows (CUDA sums dK, dV in column chunks).
    const AttentionCase grouped[] = {
        {{1, 96, 16, 1, 16}, false}, {{1, 64, 32, 2, 8}, false}, {{1, 5, 2, 2, 16}, false}};
    for (DType t : kFloatTypes)
        for (const auto& c : grouped) out.push_back(backward_case(c, t, false));

    // Flash: several (s, d, kv) shapes, s not a multiple of any tile, head
    // dims 64 and 128, grouped and multi-query heads; against flash on the
    // reference, and against eager.
    const AttentionCase flash[] = {
        {{2, 64, 4, 2, 32}, true, AttentionKind::fused},
        {{1, 33, 2, 2, 16}, false, AttentionKind::fused},
        {{1, 130, 4, 1, 64}, false, AttentionKind::fused},
        {{1, 75, 4, 2, 128}, false, AttentionKind::fused},
    };
    for (DType t : kFloatTypes)
        for (const auto& c : flash) {
            out.push_back(forward_case(c, t));
            out.push_back(backward_case(c, t, false));
            out.push_back(forward_case(c, t, true));
            out.push_back(backward_case(c, t, false, true));
        }
    for (DType t : kFloatTypes) out.push_back(backward_case(flash[0], t, true));

    // Flash on tensor cores (CUDA, bf16 and fp16 at head dims 64 and 128):
    // more query tiles than one block, s a multiple of no tile, batch 2,
    // heads without grouping and multi-query heads.
    const AttentionCase tensor_cores[] = {
        {{2, 100, 4, 2, 64}, false, AttentionKind::fused},
        {{1, 64, 8, 1, 64}, false, AttentionKind::fused},
        {{1, 200, 2, 2, 128}, false, AttentionKind::fused},
    };
    for (DType t : {DType::bf16, DType::f16})
        for (const auto& c : tensor_cores) {
            out.push_back(forward_case(c, t));
            out.push_back(backward_case(c, t, false));
            out.push_back(forward_case(c, t, true));
            out.push_back(backward_case(c, t, false, true));
        }
    out.push_back(backward_case(tensor_cores[2], DType::bf16, true));  // dQ over dO at head dim 128
}

}  // namespace tune::kernels::selftest
