// CPU causal attention with grouped KV heads, on a fused QKV layout: forward
// and probabilities against a naive double reference, backward against
// central differences of it; 16-bit storage; dq written over dout.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/error.h"
#include "tests/backend_test_util.h"

using namespace tune::kernels;
using tune::testing::numeric_grad;
using tune::testing::random_floats;
using tune::testing::rel_error;
using tune::testing::widen;

namespace {

// q | k | v column blocks of one (B*S, (H + 2 KVH) D) buffer.
struct Layout {
    AttentionShape sh;
    std::int64_t stride() const { return (sh.heads + 2 * sh.kv_heads) * sh.head_dim; }
    std::int64_t k_off() const { return sh.heads * sh.head_dim; }
    std::int64_t v_off() const { return (sh.heads + sh.kv_heads) * sh.head_dim; }
    std::int64_t tokens() const { return sh.batch * sh.seq; }
    std::int64_t out_size() const { return tokens() * sh.heads * sh.head_dim; }
};

// out (B, S, H, D) from the fused qkv buffer, in double.
std::vector<double> attention_ref(const std::vector<double>& qkv, const Layout& l) {
    const auto& sh = l.sh;
    const std::int64_t S = sh.seq, D = sh.head_dim, HD = sh.heads * D, group = sh.heads / sh.kv_heads;
    std::vector<double> out(l.out_size(), 0.0);
    for (std::int64_t b = 0; b < sh.batch; ++b)
        for (std::int64_t h = 0; h < sh.heads; ++h) {
            const std::int64_t kvh = h / group;
            for (std::int64_t i = 0; i < S; ++i) {
                const double* q = &qkv[(b * S + i) * l.stride() + h * D];
                std::vector<double> p(i + 1);
                double mx = -1e300, sum = 0;
                for (std::int64_t j = 0; j <= i; ++j) {
                    const double* k = &qkv[(b * S + j) * l.stride() + l.k_off() + kvh * D];
                    double s = 0;
                    for (std::int64_t d = 0; d < D; ++d) s += q[d] * k[d];
                    p[j] = s / std::sqrt(static_cast<double>(D));
                    mx = std::max(mx, p[j]);
                }
                for (auto& v : p) sum += (v = std::exp(v - mx));
                for (std::int64_t j = 0; j <= i; ++j) {
                    const double* v = &qkv[(b * S + j) * l.stride() + l.v_off() + kvh * D];
                    for (std::int64_t d = 0; d < D; ++d) out[(b * S + i) * HD + h * D + d] += p[j] / sum * v[d];
                }
            }
        }
    return out;
}

struct Run {
    std::vector<float> out, probs, dqkv;
};

// Forward then backward with dout = dy, in dtype t (inputs already rounded to it).
Run run(const Layout& l, const std::vector<float>& qkv, const std::vector<float>& dy, DType t, bool dq_over_dout) {
    CpuBackend backend;
    const auto& sh = l.sh;
    const std::int64_t HD = sh.heads * sh.head_dim, P = sh.batch * sh.heads * sh.seq * sh.seq;
    const std::uint64_t es = dtype_bytes(t);
    // Byte buffers in the storage dtype.
    auto store = [&](const std::vector<float>& v) {
        std::vector<std::uint8_t> bytes(v.size() * es);
        if (t == DType::f32)
            std::memcpy(bytes.data(), v.data(), bytes.size());
        else {
            const auto s = tune::testing::to_storage(v, t);
            std::memcpy(bytes.data(), s.data(), bytes.size());
        }
        return bytes;
    };
    auto load = [&](const std::vector<std::uint8_t>& bytes) {
        std::vector<float> v(bytes.size() / es);
        if (t == DType::f32)
            std::memcpy(v.data(), bytes.data(), bytes.size());
        else {
            std::vector<std::uint16_t> s(v.size());
            std::memcpy(s.data(), bytes.data(), bytes.size());
            v = tune::testing::from_storage(s, t);
        }
        return v;
    };
    const auto in = store(qkv);
    auto out = store(std::vector<float>(l.out_size()));
    auto probs = store(std::vector<float>(P, -1.0f));
    std::vector<float> ws(backend.attention_workspace_bytes(sh, AttentionKind::materialized, t) / 4);
    const Workspace w{ws.data(), ws.size() * 4};
    const auto* q = in.data();
    AttentionForwardArgs f{.shape = sh,
                           .dtype = t,
                           .q = q,
                           .k = q + l.k_off() * es,
                           .v = q + l.v_off() * es,
                           .q_stride = l.stride(),
                           .k_stride = l.stride(),
                           .v_stride = l.stride(),
                           .out = out.data(),
                           .out_stride = HD,
                           .probs = probs.data()};
    backend.attention_forward(f, w);

    auto grads = store(std::vector<float>(qkv.size(), 7.0f));  // overwritten, whatever was there
    auto dout = store(dy);
    auto* g = grads.data();
    // dq over dout: dout lives in grads' q columns, with the fused stride.
    if (dq_over_dout)
        for (std::int64_t r = 0; r < l.tokens(); ++r)
            std::memcpy(g + r * l.stride() * es, dout.data() + r * HD * es, HD * es);
    AttentionBackwardArgs bw{.shape = sh,
                             .dtype = t,
                             .q = f.q,
                             .k = f.k,
                             .v = f.v,
                             .q_stride = l.stride(),
                             .k_stride = l.stride(),
                             .v_stride = l.stride(),
                             .probs = probs.data(),
                             .dout = dq_over_dout ? static_cast<const void*>(g) : dout.data(),
                             .dout_stride = dq_over_dout ? l.stride() : HD,
                             .dq = g,
                             .dk = g + l.k_off() * es,
                             .dv = g + l.v_off() * es};
    backend.attention_backward(bw, w);
    return {load(out), load(probs), load(grads)};
}

double dot(const std::vector<double>& a, const std::vector<float>& b) {
    double s = 0;
    for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
    return s;
}

void check_fp32(const AttentionShape& sh) {
    const Layout l{sh};
    const auto qkv = random_floats(l.tokens() * l.stride(), 11), dy = random_floats(l.out_size(), 12);
    const Run r = run(l, qkv, dy, DType::f32, false);
    CHECK(rel_error(r.out, attention_ref(widen(qkv), l)) < 1e-5);

    // Probabilities: causal (upper triangle exactly 0) and normalized rows.
    for (std::int64_t row = 0; row < sh.batch * sh.heads * sh.seq; ++row) {
        const std::int64_t i = row % sh.seq;
        double sum = 0;
        for (std::int64_t j = 0; j < sh.seq; ++j) {
            const float p = r.probs[row * sh.seq + j];
            if (j > i) REQUIRE(p == 0.0f);
            sum += p;
        }
        REQUIRE(sum == Approx(1.0).epsilon(1e-5));
    }

    const auto g = numeric_grad([&](const auto& v) { return dot(attention_ref(v, l), dy); }, widen(qkv));
    CHECK(rel_error(r.dqkv, g) < 1e-4);
    const Run aliased = run(l, qkv, dy, DType::f32, true);
    CHECK(aliased.dqkv == r.dqkv);
}

}  // namespace

TEST_CASE("cpu attention: grouped KV heads (2 q heads per kv head)", "[cpu][attention]") {
    check_fp32({.batch = 2, .seq = 5, .heads = 4, .kv_heads = 2, .head_dim = 4});
}

TEST_CASE("cpu attention: multi-query and plain multi-head", "[cpu][attention]") {
    check_fp32({.batch = 1, .seq = 6, .heads = 3, .kv_heads = 1, .head_dim = 2});
    check_fp32({.batch = 2, .seq = 3, .heads = 2, .kv_heads = 2, .head_dim = 6});
}

TEST_CASE("cpu attention: sequences longer than one row block (causal blocking)", "[cpu][attention]") {
    check_fp32({.batch = 1, .seq = 150, .heads = 2, .kv_heads = 1, .head_dim = 2});
}

TEST_CASE("cpu attention: bf16 and fp16 storage stay close to the double reference", "[cpu][attention]") {
    const Layout l{{.batch = 2, .seq = 7, .heads = 4, .kv_heads = 2, .head_dim = 8}};
    for (DType t : {DType::bf16, DType::f16}) {
        INFO(dtype_name(t));
        const auto qkv = tune::testing::rounded(random_floats(l.tokens() * l.stride(), 21), t);
        const auto dy = tune::testing::rounded(random_floats(l.out_size(), 22), t);
        const Run r = run(l, qkv, dy, t, false);
        const double tol = t == DType::bf16 ? 2e-2 : 4e-3;
        CHECK(rel_error(r.out, attention_ref(widen(qkv), l)) < tol);
        const auto g = numeric_grad([&](const auto& v) { return dot(attention_ref(v, l), dy); }, widen(qkv));
        CHECK(rel_error(r.dqkv, g) < 3 * tol);
    }
}

TEST_CASE("cpu attention: dS is rounded to the storage dtype, so fp16 overflows as on CUDA and in PyTorch",
          "[cpu][attention]") {
    // Tiny q and k give uniform probabilities; v alternating +-1000 per key and
    // dout = 100 give dP = +-8e5, so dS = P (dP - rowsum(P dP)) = +-4e5 for
    // every row past the first: beyond fp16's 65504, within bf16's range. dQ
    // and dK (about 1e2) would be finite if dS stayed in fp32.
    const Layout l{{.batch = 1, .seq = 4, .heads = 1, .kv_heads = 1, .head_dim = 8}};
    std::vector<float> qkv(l.tokens() * l.stride());
    for (std::int64_t j = 0; j < l.tokens(); ++j)
        for (std::int64_t d = 0; d < 8; ++d) {
            qkv[j * l.stride() + d] = 1e-3f * static_cast<float>(1 + d % 3);
            qkv[j * l.stride() + l.k_off() + d] = 1e-3f * static_cast<float>(1 + (d + j) % 2);
            qkv[j * l.stride() + l.v_off() + d] = j % 2 == 0 ? 1000.0f : -1000.0f;
        }
    const std::vector<float> dy(l.out_size(), 100.0f);
    auto non_finite_dq = [&](DType t) {
        const Run r = run(l, tune::testing::rounded(qkv, t), dy, t, false);
        int count = 0;
        for (std::int64_t i = 0; i < l.tokens(); ++i)
            for (std::int64_t d = 0; d < 8; ++d) count += std::isfinite(r.dqkv[i * l.stride() + d]) ? 0 : 1;
        return count;
    };
    CHECK(non_finite_dq(DType::f16) == 3 * 8);  // rows 1..3; row 0's dS is 0
    CHECK(non_finite_dq(DType::bf16) == 0);
}

TEST_CASE("cpu attention: rejects fused kind, bad groups and small workspace", "[cpu][attention]") {
    CpuBackend backend;
    AttentionForwardArgs f{.shape = {.batch = 1, .seq = 2, .heads = 3, .kv_heads = 2, .head_dim = 2}};
    CHECK_THROWS_AS(backend.attention_forward(f, Workspace{}), tune::BackendError);
    f.shape.heads = 4;
    f.q_stride = f.out_stride = 8;
    f.k_stride = f.v_stride = 4;
    CHECK_THROWS_AS(backend.attention_forward(f, Workspace{}), tune::BackendError);  // no workspace
    f.kind = AttentionKind::fused;
    CHECK_THROWS_AS(backend.attention_forward(f, Workspace{}), tune::BackendError);
    const AttentionShape sh{.batch = 2, .seq = 16, .heads = 4, .kv_heads = 2, .head_dim = 8};
    CHECK(backend.attention_workspace_bytes(sh, AttentionKind::materialized, DType::f32) ==
          4ull * backend.threads() * (2 * 16 * 16 + 8 * 16 * 8));
}
