// Layer op cases: embedding (with repeated tokens), RMSNorm, RoPE (strided
// and in place), SwiGLU (halves of one fused buffer), cross-entropy (ignored
// rows, a GPT-2-sized vocabulary, dlogits aliasing the logits).
#include <algorithm>
#include <array>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "kernels/selftest/case_builder.h"
#include "kernels/selftest/cases.h"

namespace tune::kernels::selftest {

namespace {

void* at(const DeviceTensors& d, std::size_t i, std::int64_t elements, DType t) {
    return static_cast<char*>(d[i]) + elements * static_cast<std::int64_t>(dtype_bytes(t));
}

void embedding_cases(std::vector<Case>& out, DType t) {
    struct Shape {
        std::int64_t n, c, vocab;
    };
    // The last: a hundred rows per token, and columns past one tile of the CUDA
    // backward's (1024), so a list is summed by two blocks side by side.
    for (const Shape s : {Shape{64, 96, 50}, Shape{200, 33, 7}, Shape{300, 1100, 3}}) {
        const std::string label = fmt::format("N={} C={} V={}", s.n, s.c, s.vocab);
        out.push_back({"embedding_forward", name_of(t), label, [=](std::uint64_t seed) {
                           CaseBuilder cb(seed);
                           const auto table = cb.normal("table", t, s.vocab * s.c);
                           const auto tokens = cb.tokens("tokens", s.n, s.vocab);
                           const auto y = cb.zero_output("out", t, s.n * s.c, OpClass::exact);
                           return cb.build([=](Backend& be, DeviceTensors& d) {
                               be.embedding_forward(d[y], d.as<std::int32_t>(tokens), d[table], s.n, s.c, s.vocab, t,
                                                    {});
                           });
                       }});
        out.push_back({"embedding_backward", name_of(t), label, [=](std::uint64_t seed) {
                           CaseBuilder cb(seed);
                           const auto dtable = cb.normal_output("dtable", t, s.vocab * s.c, OpClass::reduction);
                           const auto tokens = cb.tokens("tokens", s.n, s.vocab);
                           const auto dy = cb.normal("dout", t, s.n * s.c);
                           return cb.build([=](Backend& be, DeviceTensors& d) {
                               const auto ws = d.workspace(be.embedding_backward_workspace_bytes(s.n, s.c, s.vocab, t));
                               be.embedding_backward(d[dtable], d.as<std::int32_t>(tokens), d[dy], s.n, s.c, s.vocab, t,
                                                     ws, {});
                           });
                       }});
    }
    // A vocabulary-parallel shard: rows [20, 35) of a vocabulary of 50; other tokens give zero rows, no gradient.
    constexpr std::int64_t n = 64, c = 96, rows = 15, begin = 20, total = 50;
    out.push_back(
        {"embedding_forward", name_of(t), "N=64 C=96 rows 20-34 of V=50", [=](std::uint64_t seed) {
             CaseBuilder cb(seed);
             const auto table = cb.normal("table", t, rows * c);
             const auto tokens = cb.tokens("tokens", n, total);
             const auto y = cb.normal_output("out", t, n * c, OpClass::exact);
             return cb.build([=](Backend& be, DeviceTensors& d) {
                 be.embedding_forward(d[y], d.as<std::int32_t>(tokens), d[table], n, c, rows, t, {begin, total});
             });
         }});
    out.push_back(
        {"embedding_backward", name_of(t), "N=64 C=96 rows 20-34 of V=50", [=](std::uint64_t seed) {
             CaseBuilder cb(seed);
             const auto dtable = cb.normal_output("dtable", t, rows * c, OpClass::reduction);
             const auto tokens = cb.tokens("tokens", n, total);
             const auto dy = cb.normal("dout", t, n * c);
             return cb.build([=](Backend& be, DeviceTensors& d) {
                 const auto ws = d.workspace(be.embedding_backward_workspace_bytes(n, c, rows, t));
                 be.embedding_backward(d[dtable], d.as<std::int32_t>(tokens), d[dy], n, c, rows, t, ws, {begin, total});
             });
         }});
}

void rmsnorm_cases(std::vector<Case>& out, DType t) {
    struct Shape {
        std::int64_t n, c;
        bool accumulate;
    };
    for (const Shape s : {Shape{64, 96, false}, Shape{7, 1030, true}}) {
        const std::string label = fmt::format("N={} C={}", s.n, s.c);
        out.push_back({"rmsnorm_forward", name_of(t), label, [=](std::uint64_t seed) {
                           CaseBuilder cb(seed);
                           const auto x = cb.normal("x", t, s.n * s.c);
                           const auto w = cb.normal("weight", t, s.c);
                           const auto y = cb.zero_output("out", t, s.n * s.c, OpClass::reduction);
                           const auto rstd = cb.zero_output("rstd", DType::f32, s.n, OpClass::reduction);
                           return cb.build([=](Backend& be, DeviceTensors& d) {
                               be.rmsnorm_forward(d[y], d.as<float>(rstd), d[x], d[w], s.n, s.c, 1e-5f, t);
                           });
                       }});
        out.push_back(
            {"rmsnorm_backward", name_of(t), label + (s.accumulate ? " accumulate" : ""), [=](std::uint64_t seed) {
                 CaseBuilder cb(seed);
                 const auto x = cb.normal("x", t, s.n * s.c);
                 const auto w = cb.normal("weight", t, s.c);
                 const auto dy = cb.normal("dout", t, s.n * s.c);
                 const auto y = cb.zero_output("out", t, s.n * s.c, OpClass::reduction);
                 const auto rstd = cb.zero_output("rstd", DType::f32, s.n, OpClass::reduction);
                 const auto dx = cb.normal_output("dx", t, s.n * s.c, OpClass::reduction);
                 const auto dw = cb.normal_output("dweight", t, s.c, OpClass::reduction);
                 return cb.build([=](Backend& be, DeviceTensors& d) {
                     be.rmsnorm_forward(d[y], d.as<float>(rstd), d[x], d[w], s.n, s.c, 1e-5f, t);
                     be.rmsnorm_backward(d[dx], d[dw], d[dy], d[x], d[w], d.as<float>(rstd), s.n, s.c, s.accumulate, t);
                 });
             }});
    }
}

void rope_cases(std::vector<Case>& out, DType t) {
    // (B, S, H, D) read from a wider row (a fused QKV output), written compact; and in place.
    const std::int64_t b = 2, s = 16, h = 3, dim = 32, wide = h * dim + 40;
    for (const bool backward : {false, true}) {
        const char* op = backward ? "rope_backward" : "rope_forward";
        out.push_back(
            {op, name_of(t), fmt::format("B={} S={} H={} D={} stride={}", b, s, h, dim, wide), [=](std::uint64_t seed) {
                 CaseBuilder cb(seed);
                 const auto in = cb.normal("in", t, b * s * wide);
                 const auto y = cb.zero_output("out", t, b * s * h * dim, OpClass::elementwise);
                 return cb.build([=](Backend& be, DeviceTensors& d) {
                     const math::RopeFrequencies f{10000.0f};
                     if (backward)
                         be.rope_backward(d[y], h * dim, d[in], wide, b, s, h, dim, f, t);
                     else
                         be.rope_forward(d[y], h * dim, d[in], wide, b, s, h, dim, f, t);
                 });
             }});
        // Llama 3.1's scaling: with theta 5e5 and D = 64 the pairs' wavelengths span all
        // three of its bands (kept, blended, divided by the factor).
        const math::RopeFrequencies llama3{5e5f, math::RopeScalingKind::llama3, 8.0f, 1.0f, 4.0f, 8192.0f};
        for (const auto& [what, f] :
             {std::pair{"theta=5e5", math::RopeFrequencies{5e5f}}, std::pair{"theta=5e5 llama3 factor 8", llama3}})
            out.push_back({op, name_of(t), fmt::format("B=1 S=40 H=2 D=64 in-place {}", what), [=](std::uint64_t seed) {
                               CaseBuilder cb(seed);
                               const auto x = cb.normal("x", t, 40 * 2 * 64);
                               cb.mark_output(x, OpClass::elementwise);
                               return cb.build([=](Backend& be, DeviceTensors& d) {
                                   if (backward)
                                       be.rope_backward(d[x], 128, d[x], 128, 1, 40, 2, 64, f, t);
                                   else
                                       be.rope_forward(d[x], 128, d[x], 128, 1, 40, 2, 64, f, t);
                               });
                           }});
    }
}

// Gate and up side by side (row stride 2F, the halves of one fused GEMM) and as separate
// contiguous buffers (stride F): the kernels index the two ways. F = 84 is no multiple of 8,
// so the CUDA kernels take their element-at-a-time path instead of packs of 8.
void swiglu_cases(std::vector<Case>& out, DType t) {
    const std::int64_t n = 32;
    for (const auto& shape : {std::pair<std::int64_t, std::int64_t>{80, 160}, {80, 80}, {84, 168}}) {
        const std::int64_t f = shape.first, stride = shape.second;
        const std::string label = fmt::format("N={} F={} stride={}", n, f, stride);
        // gate at 0, up at f (fused) or at n * f (separate); either way rows `stride` apart.
        const std::int64_t up_at = stride == f ? n * f : f;
        out.push_back({"swiglu_forward", name_of(t), label, [=](std::uint64_t seed) {
                           CaseBuilder cb(seed);
                           const auto gu = cb.normal("gate|up", t, n * 2 * f, 2.0f);
                           const auto y = cb.zero_output("out", t, n * f, OpClass::elementwise);
                           return cb.build([=](Backend& be, DeviceTensors& d) {
                               be.swiglu_forward(d[y], d[gu], at(d, gu, up_at, t), n, f, stride, t);
                           });
                       }});
        out.push_back({"swiglu_backward", name_of(t), label, [=](std::uint64_t seed) {
                           CaseBuilder cb(seed);
                           const auto gu = cb.normal("gate|up", t, n * 2 * f, 2.0f);
                           const auto dy = cb.normal("dout", t, n * f);
                           const auto dgu = cb.zero_output("dgate|dup", t, n * 2 * f, OpClass::elementwise);
                           return cb.build([=](Backend& be, DeviceTensors& d) {
                               be.swiglu_backward(d[dgu], at(d, dgu, up_at, t), d[dy], d[gu], at(d, gu, up_at, t), n, f,
                                                  stride, t);
                           });
                       }});
    }
}

void cross_entropy_cases(std::vector<Case>& out, DType t) {
    struct Shape {
        std::int64_t rows, vocab;
    };
    // Forward only (dlogits = nullptr, the evaluation path): losses alone; once, as no dtype is involved.
    if (t == DType::f32)
        out.push_back({"cross_entropy", name_of(t), "N=16 V=1000 forward-only", [=](std::uint64_t seed) {
                           CaseBuilder cb(seed);
                           const auto logits = cb.normal("logits", DType::f32, 16 * 1000, 3.0f);
                           const auto targets = cb.tokens("targets", 16, 1000);
                           cb.set(targets, 3, -1.0f);
                           const auto losses = cb.zero_output("losses", DType::f32, 16, OpClass::reduction);
                           cb.mark_output(logits, OpClass::exact);  // must stay untouched
                           return cb.build([=](Backend& be, DeviceTensors& d) {
                               CrossEntropyArgs a;
                               a.rows = 16, a.vocab = 1000;
                               a.logits = d.as<float>(logits), a.targets = d.as<std::int32_t>(targets);
                               a.losses = d.as<float>(losses), a.dlogits = nullptr, a.dlogits_dtype = t;
                               be.cross_entropy(a);
                           });
                       }});
    for (const Shape s : {Shape{16, 1000}, Shape{5, 50257}}) {
        const bool alias = t == DType::f32;  // dlogits written over the logits
        const std::string label = fmt::format("N={} V={}{}", s.rows, s.vocab, alias ? " in-place" : "");
        out.push_back({"cross_entropy", name_of(t), label, [=](std::uint64_t seed) {
                           CaseBuilder cb(seed);
                           const auto logits = cb.normal("logits", DType::f32, s.rows * s.vocab, 3.0f);
                           const auto targets = cb.tokens("targets", s.rows, s.vocab);
                           cb.set(targets, 1, -1.0f);  // an ignored row
                           const auto losses = cb.zero_output("losses", DType::f32, s.rows, OpClass::reduction);
                           const auto dl =
                               alias ? logits : cb.zero_output("dlogits", t, s.rows * s.vocab, OpClass::reduction);
                           if (alias) cb.mark_output(logits, OpClass::reduction);
                           return cb.build([=](Backend& be, DeviceTensors& d) {
                               CrossEntropyArgs a;
                               a.rows = s.rows, a.vocab = s.vocab;
                               a.logits = d.as<float>(logits), a.targets = d.as<std::int32_t>(targets);
                               a.losses = d.as<float>(losses), a.dlogits = d[dl], a.dlogits_dtype = t;
                               a.grad_scale = 1.0f / static_cast<float>(s.rows);
                               be.cross_entropy(a);
                           });
                       }});
    }
}

// A vocabulary split in two shards (columns [0, V0) and [V0, V)) through the three stages, the
// rows' statistics combined on the host between them as the shards' collectives would.
void cross_entropy_shard_cases(std::vector<Case>& out, DType t) {
    constexpr std::int64_t N = 12, V = 1000, V0 = 384;
    out.push_back(
        {"cross_entropy", name_of(t), "N=12 V=1000 two shards", [=](std::uint64_t seed) {
             CaseBuilder cb(seed);
             const std::array<std::int64_t, 2> cols{V0, V - V0}, begin{0, V0};
             std::array<std::size_t, 2> logits{}, dl{}, losses{}, stats{};
             for (std::size_t k = 0; k < 2; ++k) {
                 logits[k] = cb.normal(fmt::format("logits{}", k), DType::f32, N * cols[k], 3.0f);
                 dl[k] = cb.zero_output(fmt::format("dlogits{}", k), t, N * cols[k], OpClass::reduction);
                 losses[k] = cb.zero_output(fmt::format("losses{}", k), DType::f32, N, OpClass::reduction);
                 stats[k] = cb.zero_output(fmt::format("stats{}", k), DType::f32, 3 * N, OpClass::reduction);
             }
             const auto targets = cb.tokens("targets", N, V);
             cb.set(targets, 2, -1.0f);  // an ignored row
             return cb.build([=](Backend& be, DeviceTensors& d) {
                 const auto run = [&](std::size_t k, CrossEntropyStage stage) {
                     be.cross_entropy({.rows = N,
                                       .vocab = cols[k],
                                       .logits = d.as<float>(logits[k]),
                                       .targets = d.as<std::int32_t>(targets),
                                       .losses = d.as<float>(losses[k]),
                                       .dlogits = d[dl[k]],
                                       .dlogits_dtype = t,
                                       .grad_scale = 0.5f,
                                       .stage = stage,
                                       .vocab_begin = begin[k],
                                       .vocab_total = V,
                                       .stats = d.as<float>(stats[k])});
                 };
                 // Combine parts [from, from + n) of both shards' stats: max, or sum.
                 const auto combine = [&](std::int64_t from, std::int64_t n, bool max) {
                     std::array<std::vector<float>, 2> h{std::vector<float>(3 * N), std::vector<float>(3 * N)};
                     for (std::size_t k = 0; k < 2; ++k) be.copy_to_host(h[k].data(), d[stats[k]], 4 * 3 * N);
                     for (std::int64_t i = from; i < from + n; ++i)
                         h[0][i] = h[1][i] = max ? std::max(h[0][i], h[1][i]) : h[0][i] + h[1][i];
                     for (std::size_t k = 0; k < 2; ++k) be.copy_to_device(d[stats[k]], h[k].data(), 4 * 3 * N);
                 };
                 for (std::size_t k = 0; k < 2; ++k) run(k, CrossEntropyStage::max);
                 combine(0, N, true);
                 for (std::size_t k = 0; k < 2; ++k) run(k, CrossEntropyStage::sum);
                 combine(N, 2 * N, false);
                 for (std::size_t k = 0; k < 2; ++k) run(k, CrossEntropyStage::finish);
             });
         }});
}

}  // namespace

void add_layer_cases(std::vector<Case>& out) {
    for (DType t : kFloatTypes) {
        embedding_cases(out, t);
        rmsnorm_cases(out, t);
        rope_cases(out, t);
        swiglu_cases(out, t);
        cross_entropy_cases(out, t);
        cross_entropy_shard_cases(out, t);
    }
}

}  // namespace tune::kernels::selftest
