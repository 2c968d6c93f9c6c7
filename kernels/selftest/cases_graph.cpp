// Ops recorded into a graph and replayed (kernels/backend.h OpGraph): a GEMM
// whose plan a first call made, an add and a scale, replayed twice into an
// accumulator, so a graph that ran nothing, ran once, or kept a stale
// argument shows; and the trainer's replayed AdamW and 8-bit Adam updates,
// whose step the graph copies from pinned host memory to the device before the
// update reads it, over steps 1 to 3, so a step count frozen at recording shows. On a GPU
// this is a CUDA graph; the CPU calls the ops again.
#include <fmt/format.h>

#include <functional>
#include <memory>

#include "kernels/selftest/case_builder.h"
#include "kernels/selftest/cases.h"

namespace tune::kernels::selftest {

namespace {

Case graph_case(DType t) {
    constexpr std::int64_t m = 16, n = 24, k = 32;
    return {"graph replay",
            name_of(t),
            fmt::format("m={} n={} k={} two replays", m, n, k),
            [=](std::uint64_t seed) {
                CaseBuilder cb(seed);
                const auto x = cb.normal("x", t, m * k);
                const auto w = cb.normal("w", t, n * k, 0.2f);
                const auto r = cb.normal("r", t, m * n);
                const auto y = cb.zero_output("y", t, m * n, OpClass::matmul);
                const auto acc = cb.normal_output("acc", t, m * n, OpClass::matmul);
                return cb.build([=](Backend& be, DeviceTensors& d) {
                    GemmArgs g;
                    g.m = m, g.n = n, g.k = k, g.trans_b = true;
                    g.a = d[x], g.lda = k, g.b = d[w], g.ldb = k, g.c = d[y], g.ldc = n;
                    g.a_dtype = g.b_dtype = g.c_dtype = t;
                    const Workspace ws = d.workspace(be.gemm_workspace_bytes(g));
                    be.gemm(g, ws);  // the plan, made outside the graph
                    // y = x W^T + r, halved; acc += y
                    const std::unique_ptr<OpGraph> graph = be.record([&] {
                        be.gemm(g, ws);
                        be.add(d[y], d[y], d[r], m * n, t);
                        be.scale(d[y], m * n, 0.5f, t);
                        be.add(d[acc], d[acc], d[y], m * n, t);
                    });
                    graph->replay();
                    graph->replay();
                });
            },
            {"gemm", "add", "scale"}};
}

// Attention in a graph, behind a scale of q: each replay halves q first, so an
// attention computed once at recording, from q as it was then, shows. Grouped
// key/value heads in 16 bits: the fused path (cuDNN's graph where it is loaded).
Case attention_graph_case() {
    const AttentionShape s{.batch = 1, .seq = 64, .heads = 4, .kv_heads = 2, .head_dim = 32};
    const DType t = DType::bf16;
    const std::int64_t n = s.batch * s.seq, qw = s.heads * s.head_dim, kw = s.kv_heads * s.head_dim;
    return {"graph replay",
            name_of(t),
            fmt::format("attention_forward B={} S={} H={} KVH={} D={} flash, q halved before each replay", s.batch,
                        s.seq, s.heads, s.kv_heads, s.head_dim),
            [=](std::uint64_t seed) {
                CaseBuilder cb(seed);
                const auto q = cb.normal("q", t, n * qw);
                const auto k = cb.normal("k", t, n * kw);
                const auto v = cb.normal("v", t, n * kw);
                const auto out = cb.zero_output("out", t, n * qw, OpClass::matmul);
                const auto lse = cb.normal("lse", DType::f32, s.batch * s.heads * s.seq);  // overwritten, not judged
                const auto acc = cb.normal_output("acc", t, n * qw, OpClass::matmul);
                return cb.build([=](Backend& be, DeviceTensors& d) {
                    AttentionForwardArgs a;
                    a.shape = s, a.kind = AttentionKind::fused, a.dtype = t;
                    a.q = d[q], a.k = d[k], a.v = d[v], a.q_stride = qw, a.k_stride = kw, a.v_stride = kw;
                    a.out = d[out], a.out_stride = qw, a.lse = d.as<float>(lse);
                    const Workspace ws = d.workspace(be.attention_workspace_bytes(s, a.kind, t));
                    be.attention_forward(a, ws);  // its plan, made outside the graph
                    const std::unique_ptr<OpGraph> graph = be.record([&] {
                        be.scale(d[q], n * qw, 0.5f, t);
                        be.attention_forward(a, ws);
                        be.add(d[acc], d[acc], d[out], n * qw, t);
                    });
                    graph->replay();
                    graph->replay();
                });
            },
            {"attention_forward", "scale", "add"}};
}

constexpr int kReplayedSteps = 3;

// Records `update` once behind a copy of the step from pinned host memory into
// `device_step`, as the trainer's update_on_device does, and replays it for
// steps 1 to kReplayedSteps.
void replay_steps(Backend& be, std::int32_t* device_step, const std::function<void()>& update) {
    const auto release = [&be](std::int32_t* c) { be.deallocate_host(c, sizeof *c); };
    const std::unique_ptr<std::int32_t, decltype(release)> count(
        static_cast<std::int32_t*>(be.allocate_host(sizeof(std::int32_t))), release);
    const std::unique_ptr<OpGraph> graph = be.record([&] {
        be.copy(device_step, count.get(), sizeof(std::int32_t));
        update();
    });
    for (int k = 1; k <= kReplayedSteps; ++k) {
        *count = k;  // the launch before has read it: synchronized below
        graph->replay();
        be.synchronize();
    }
}

// AdamW over a flat buffer's run, or 8-bit Adam over one tensor of two blocks.
Case update_graph_case(bool eight_bit) {
    constexpr std::int64_t n = 1000, block = 500;
    const char* op = eight_bit ? "adam8bit_update" : "adamw_update";
    return {"graph replay",
            "f32",
            fmt::format("{} n={} steps 1-{} read on the device", op, n, kReplayedSteps),
            [=](std::uint64_t seed) {
                CaseBuilder cb(seed);
                const auto p = cb.normal_output("param", DType::f32, n, OpClass::optimizer, 0.05f);
                const auto g = cb.normal("grad", DType::f32, n, 0.01f);
                const auto step = cb.values("step", DType::i32, {0.0f});  // int32 0: the bits of 0.0f
                std::size_t m = 0, v = 0, am = 0, av = 0;
                if (eight_bit) {
                    m = cb.bytes("m_codes", n), v = cb.bytes("v_codes", n);
                    am = cb.uniform("absmax_m", DType::f32, n / block, 1e-3f, 2e-2f);
                    av = cb.uniform("absmax_v", DType::f32, n / block, 1e-5f, 1e-4f);
                    cb.mark_output(m, OpClass::codes), cb.mark_output(v, OpClass::codes);
                    cb.mark_output(am, OpClass::optimizer), cb.mark_output(av, OpClass::optimizer);
                } else {
                    m = cb.normal_output("m", DType::f32, n, OpClass::optimizer, 0.01f);
                    v = cb.zero_output("v", DType::f32, n, OpClass::optimizer);
                }
                return cb.build([=](Backend& be, DeviceTensors& d) {
                    ParamTensor t;
                    t.n = n, t.param = d[p], t.grad = d[g];
                    Adam8bitParams hp;
                    hp.adam.lr = 1e-3f, hp.adam.weight_decay = 0.1f, hp.block_size = block;
                    hp.adam.device_step = d.as<std::int32_t>(step);
                    replay_steps(be, d.as<std::int32_t>(step), [&] {
                        if (eight_bit)
                            be.adam8bit_update(t, d.as<std::uint8_t>(m), d.as<std::uint8_t>(v), d.as<float>(am),
                                               d.as<float>(av), hp);
                        else
                            be.adamw_update(t, d[m], d[v], DType::f32, hp.adam);
                    });
                });
            },
            {op}};
}

}  // namespace

void add_graph_cases(std::vector<Case>& out) {
    for (DType t : kFloatTypes) out.push_back(graph_case(t));
    for (bool eight_bit : {false, true}) out.push_back(update_graph_case(eight_bit));
    out.push_back(attention_graph_case());
}

}  // namespace tune::kernels::selftest
