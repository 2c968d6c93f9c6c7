// CPU flash attention (AttentionKind::fused) against the eager kernel
// (AttentionKind::materialized) on the same inputs: outputs and q, k, v
// gradients, fp32 within 1e-5 relative, bf16 and fp16 within the self-test's
// tolerance table; the log-sum-exp against a double reference; ragged last
// tiles, grouped KV heads, dq written over dout; workspace linear in s.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/compare.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/error.h"
#include "kernels/selftest/tolerance.h"
#include "kernels/workspace_bytes.h"
#include "tests/backend_test_util.h"

using namespace tune::kernels;
using tune::testing::random_floats;
using tune::testing::rel_error;

namespace {

std::vector<std::uint8_t> to_bytes(const std::vector<float>& v, DType t) {
    std::vector<std::uint8_t> bytes(v.size() * dtype_bytes(t));
    if (t == DType::f32) {
        std::memcpy(bytes.data(), v.data(), bytes.size());
    } else {
        const auto s = tune::testing::to_storage(v, t);
        std::memcpy(bytes.data(), s.data(), bytes.size());
    }
    return bytes;
}

std::vector<float> to_floats(const std::vector<std::uint8_t>& bytes, DType t) {
    std::vector<float> v(bytes.size() / dtype_bytes(t));
    if (t == DType::f32) {
        std::memcpy(v.data(), bytes.data(), bytes.size());
    } else {
        std::vector<std::uint16_t> s(v.size());
        std::memcpy(s.data(), bytes.data(), bytes.size());
        v = tune::testing::from_storage(s, t);
    }
    return v;
}

struct Result {
    std::vector<float> out, dq, dk, dv, lse;
};

// Forward and backward of one kind on separate q, k, v tensors (B, S, heads, D).
// With dq_over_dout, dout is given in the dq buffer and overwritten.
Result run(const AttentionShape& sh, AttentionKind kind, DType t, bool dq_over_dout = false, int threads = 0) {
    CpuBackend backend(CpuBackendOptions{.threads = threads});
    const std::int64_t n = sh.batch * sh.seq, qw = sh.heads * sh.head_dim, kw = sh.kv_heads * sh.head_dim;
    auto rounded = [&](std::vector<float> v) { return t == DType::f32 ? v : tune::testing::rounded(v, t); };
    const auto q = to_bytes(rounded(random_floats(n * qw, 31)), t);
    const auto k = to_bytes(rounded(random_floats(n * kw, 32)), t);
    const auto v = to_bytes(rounded(random_floats(n * kw, 33)), t);
    auto dout = to_bytes(rounded(random_floats(n * qw, 34)), t);
    auto out = to_bytes(std::vector<float>(n * qw), t);
    const bool flash = kind == AttentionKind::fused;
    auto probs = to_bytes(std::vector<float>(flash ? 0 : sh.batch * sh.heads * sh.seq * sh.seq), t);
    std::vector<float> lse(flash ? sh.batch * sh.heads * sh.seq : 0, -1.0f);
    std::vector<float> ws(backend.attention_workspace_bytes(sh, kind, t) / 4);
    const Workspace w{ws.data(), ws.size() * 4};

    AttentionForwardArgs f{.shape = sh,
                           .kind = kind,
                           .dtype = t,
                           .q = q.data(),
                           .k = k.data(),
                           .v = v.data(),
                           .q_stride = qw,
                           .k_stride = kw,
                           .v_stride = kw,
                           .out = out.data(),
                           .out_stride = qw,
                           .probs = flash ? nullptr : probs.data(),
                           .lse = flash ? lse.data() : nullptr};
    backend.attention_forward(f, w);

    auto dq = dq_over_dout ? dout : to_bytes(std::vector<float>(n * qw, 7.0f), t);
    auto dk = to_bytes(std::vector<float>(n * kw, 7.0f), t), dv = dk;
    AttentionBackwardArgs b{.shape = sh,
                            .kind = kind,
                            .dtype = t,
                            .q = q.data(),
                            .k = k.data(),
                            .v = v.data(),
                            .q_stride = qw,
                            .k_stride = kw,
                            .v_stride = kw,
                            .probs = flash ? nullptr : probs.data(),
                            .out = flash ? out.data() : nullptr,
                            .lse = flash ? lse.data() : nullptr,
                            .out_stride = qw,
                            .dout = dq_over_dout ? dq.data() : dout.data(),
                            .dout_stride = qw,
                            .dq = dq.data(),
                            .dk = dk.data(),
                            .dv = dv.data()};
    backend.attention_backward(b, w);
    return {to_floats(out, t), to_floats(dq, t), to_floats(dk, t), to_floats(dv, t), lse};
}

double rel(const std::vector<float>& got, const std::vector<float>& ref) {
    return rel_error(got, tune::testing::widen(ref));
}

void check_fp32_against_eager(const AttentionShape& sh) {
    const Result e = run(sh, AttentionKind::materialized, DType::f32);
    const Result f = run(sh, AttentionKind::fused, DType::f32);
    CHECK(rel(f.out, e.out) < 1e-5);
    CHECK(rel(f.dq, e.dq) < 1e-5);
    CHECK(rel(f.dk, e.dk) < 1e-5);
    CHECK(rel(f.dv, e.dv) < 1e-5);
}

// lse[b, h, i] = log sum_{j <= i} exp(q_i . k_j / sqrt(D)), in double.
std::vector<double> lse_ref(const AttentionShape& sh) {
    const std::int64_t n = sh.batch * sh.seq, qw = sh.heads * sh.head_dim, kw = sh.kv_heads * sh.head_dim;
    const auto q = random_floats(n * qw, 31), k = random_floats(n * kw, 32);
    const std::int64_t S = sh.seq, D = sh.head_dim, group = sh.heads / sh.kv_heads;
    std::vector<double> out;
    for (std::int64_t b = 0; b < sh.batch; ++b)
        for (std::int64_t h = 0; h < sh.heads; ++h)
            for (std::int64_t i = 0; i < S; ++i) {
                std::vector<double> s;
                double mx = -1e300, sum = 0;
                for (std::int64_t j = 0; j <= i; ++j) {
                    double dot = 0;
                    for (std::int64_t c = 0; c < D; ++c)
                        dot += double{q[(b * S + i) * qw + h * D + c]} * k[(b * S + j) * kw + (h / group) * D + c];
                    s.push_back(dot / std::sqrt(static_cast<double>(D)));
                    mx = std::max(mx, s.back());
                }
                for (double x : s) sum += std::exp(x - mx);
                out.push_back(mx + std::log(sum));
            }
    return out;
}

}  // namespace

TEST_CASE("cpu flash attention: fp32 matches eager within 1e-5, grouped and plain heads", "[cpu][attention][flash]") {
    check_fp32_against_eager({.batch = 2, .seq = 5, .heads = 4, .kv_heads = 2, .head_dim = 4});
    check_fp32_against_eager({.batch = 1, .seq = 6, .heads = 3, .kv_heads = 1, .head_dim = 2});
    check_fp32_against_eager({.batch = 2, .seq = 3, .heads = 2, .kv_heads = 2, .head_dim = 6});
}

TEST_CASE("cpu flash attention: several tiles, ragged last tile (s not a multiple of the tile)",
          "[cpu][attention][flash]") {
    check_fp32_against_eager({.batch = 1, .seq = 150, .heads = 2, .kv_heads = 1, .head_dim = 16});
    check_fp32_against_eager({.batch = 2, .seq = 64, .heads = 4, .kv_heads = 2, .head_dim = 32});
    check_fp32_against_eager({.batch = 1, .seq = 257, .heads = 4, .kv_heads = 1, .head_dim = 64});
    // Four heads per kv head, both batch elements, the last tile 8 rows.
    check_fp32_against_eager({.batch = 2, .seq = 200, .heads = 8, .kv_heads = 2, .head_dim = 32});
}

TEST_CASE("cpu flash attention: lse is the rows' log-sum-exp", "[cpu][attention][flash]") {
    const AttentionShape sh{.batch = 2, .seq = 131, .heads = 4, .kv_heads = 2, .head_dim = 8};
    const Result f = run(sh, AttentionKind::fused, DType::f32);
    CHECK(rel_error(f.lse, lse_ref(sh)) < 1e-6);
}

TEST_CASE("cpu flash attention: bf16 and fp16 match eager within the tolerance table", "[cpu][attention][flash]") {
    const AttentionShape sh{.batch = 2, .seq = 100, .heads = 4, .kv_heads = 2, .head_dim = 32};
    for (DType t : {DType::bf16, DType::f16}) {
        INFO(dtype_name(t));
        const Result e = run(sh, AttentionKind::materialized, t);
        const Result f = run(sh, AttentionKind::fused, t);
        const auto tol = selftest::tolerance_for(selftest::OpClass::matmul, t);
        for (auto [got, ref] : {std::pair{&f.out, &e.out}, {&f.dq, &e.dq}, {&f.dk, &e.dk}, {&f.dv, &e.dv}}) {
            const ErrorStats s = compare_buffers(ref->data(), got->data(), static_cast<std::int64_t>(got->size()));
            INFO("nmse " << s.nmse << " max_abs " << s.max_abs);
            CHECK(selftest::passes(s, tol));
        }
    }
}

TEST_CASE("cpu flash attention: the kernels stay inside the workspace and reach its end", "[cpu][attention][flash]") {
    const AttentionShape sh{.batch = 2, .seq = 100, .heads = 4, .kv_heads = 2, .head_dim = 16};
    CpuBackend backend(CpuBackendOptions{.threads = 1});
    const std::int64_t n = sh.batch * sh.seq, qw = sh.heads * sh.head_dim, kw = sh.kv_heads * sh.head_dim;
    const auto q = random_floats(n * qw, 1), k = random_floats(n * kw, 2), v = random_floats(n * kw, 3);
    const auto dout = random_floats(n * qw, 4);
    std::vector<float> out(n * qw), lse(sh.batch * sh.heads * sh.seq), dq(n * qw), dk(n * kw), dv(n * kw);
    const std::uint64_t bytes = backend.attention_workspace_bytes(sh, AttentionKind::fused, DType::f32);
    constexpr float kUntouched = 12345.0f;
    constexpr std::size_t kGuard = 64;
    std::vector<float> ws(bytes / 4 + kGuard, kUntouched);
    const Workspace w{ws.data(), bytes};
    AttentionForwardArgs f{.shape = sh,
                           .kind = AttentionKind::fused,
                           .q = q.data(),
                           .k = k.data(),
                           .v = v.data(),
                           .q_stride = qw,
                           .k_stride = kw,
                           .v_stride = kw,
                           .out = out.data(),
                           .out_stride = qw,
                           .lse = lse.data()};
    AttentionBackwardArgs b{.shape = sh,
                            .kind = AttentionKind::fused,
                            .q = q.data(),
                            .k = k.data(),
                            .v = v.data(),
                            .q_stride = qw,
                            .k_stride = kw,
                            .v_stride = kw,
                            .out = out.data(),
                            .lse = lse.data(),
                            .out_stride = qw,
                            .dout = dout.data(),
                            .dout_stride = qw,
                            .dq = dq.data(),
                            .dk = dk.data(),
                            .dv = dv.data()};
    backend.attention_forward(f, w);
    backend.attention_backward(b, w);
    // One thread: its dV accumulator, the last (s, d) block, ends the workspace.
    CHECK(ws[bytes / 4 - 1] != kUntouched);
    for (std::size_t i = bytes / 4; i < ws.size(); ++i) REQUIRE(ws[i] == kUntouched);
}

TEST_CASE("cpu flash attention: dq over dout, and any thread count, give the same bits", "[cpu][attention][flash]") {
    const AttentionShape sh{.batch = 1, .seq = 140, .heads = 4, .kv_heads = 2, .head_dim = 16};
    const Result plain = run(sh, AttentionKind::fused, DType::f32, false, 1);
    const Result aliased = run(sh, AttentionKind::fused, DType::f32, true, 2);
    CHECK(aliased.out == plain.out);
    CHECK(aliased.dq == plain.dq);
    CHECK(aliased.dk == plain.dk);
    CHECK(aliased.dv == plain.dv);
}

TEST_CASE("cpu flash attention: workspace grows linearly with the context, not quadratically",
          "[cpu][attention][flash]") {
    CpuBackend backend(CpuBackendOptions{.threads = 3});
    const AttentionShape small{.batch = 1, .seq = 128, .heads = 8, .kv_heads = 8, .head_dim = 64};
    AttentionShape huge = small;
    huge.seq = 1 << 20;
    // Per thread: tiles independent of s, and the (s, d) dK and dV accumulators.
    const std::uint64_t grown = backend.attention_workspace_bytes(huge, AttentionKind::fused, DType::bf16) -
                                backend.attention_workspace_bytes(small, AttentionKind::fused, DType::bf16);
    CHECK(grown == 3 * 4 * 2 * std::uint64_t{(1 << 20) - 128} * 64);
    CHECK(backend.attention_workspace_bytes(small, AttentionKind::fused, DType::f32) ==
          workspace::cpu_flash_attention_bytes(3, 128, 64));
    // Flash needs lse (forward and backward) and out (backward), not probs.
    AttentionForwardArgs f{.shape = small, .kind = AttentionKind::fused};
    f.q_stride = f.out_stride = 512, f.k_stride = f.v_stride = 512;
    std::vector<float> ws(backend.attention_workspace_bytes(small, AttentionKind::fused, DType::f32) / 4);
    CHECK_THROWS_WITH(backend.attention_forward(f, Workspace{ws.data(), ws.size() * 4}), Catch::Contains("lse"));
}
