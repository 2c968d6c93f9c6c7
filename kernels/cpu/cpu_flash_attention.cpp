// Causal flash attention on the CPU (FlashAttention-2 order): square tiles of
// kCpuFlashTile queries and keys, register-blocked tile products
// (tile_gemm.h), the online softmax of kernels/math/online_softmax.h. Fully
// masked key tiles are never touched. Nothing of size S x S exists: per thread, the scratch of
// workspace::cpu_flash_attention_floats(S, D).
//
// Forward: OpenMP over (batch, head, query tile); each keeps its running max,
// sum and (tile, D) output accumulator, and stores O and lse (B, H, S) fp32.
// Backward: one pass, OpenMP over (batch, kv head). For each of the group's
// heads and each query tile, over the key tiles at or below the diagonal, it
// recomputes P = exp(scale q k^T - lse) and dS = P * (dP - D), with
// D = rowsum(dO * O) of the query tile, once per tile pair, and adds
// P^T dO, dS^T q into the thread's (S, D) dV, dK accumulators and dS k into
// the query tile's dQ. A thread owns its slab's dK, dV and dQ, so no two
// threads write one gradient and the sums run in the same order for any
// thread count. A query tile's dQ is written once its dO has been read for
// the last time, so dQ may alias dO.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "kernels/cpu/cpu_flash_attention.h"
#include "kernels/cpu/fast_exp.h"
#include "kernels/cpu/tile_gemm.h"
#include "kernels/cpu/typed.h"
#include "kernels/cpu/vectorize.h"
#include "kernels/math/online_softmax.h"
#include "kernels/workspace_bytes.h"

namespace tune::kernels::cpu {

namespace {

constexpr std::int64_t kTile = static_cast<std::int64_t>(workspace::kCpuFlashTile);

// One thread's scratch (workspace::cpu_flash_attention_floats).
struct Scratch {
    float *q, *k, *v, *dout, *acc;  // (tile, D)
    float *kt, *vt;                 // (D, tile): forward k^T; backward q^T and dO^T
    float *s, *dp;                  // (tile, tile)
    float *m, *l, *delta;           // (tile)
    float *dk, *dv;                 // (S, D), backward only

    Scratch(float* base, std::int64_t seq, std::int64_t d) {
        float* at = base;
        for (float** block : {&q, &k, &v, &dout, &acc, &kt, &vt}) *block = at, at += kTile * d;
        s = at, at += kTile * kTile;
        dp = at, at += kTile * kTile;
        m = at, l = at + kTile, delta = at + 2 * kTile, at += 3 * kTile;
        dk = at, dv = at + seq * d;
    }
};

// `rows` rows of D elements (row stride `stride`) as fp32: in place for float
// storage, else widened into buf.
template <class T>
Mat read_rows(const T* src, std::int64_t stride, std::int64_t rows, std::int64_t d, float* buf) {
    if constexpr (std::is_same_v<T, float>) {
        return {const_cast<float*>(src), stride};
    } else {
        for (std::int64_t i = 0; i < rows; ++i) load_run(src + i * stride, d, buf + i * d);
        return {buf, d};
    }
}

template <class T>
void write_rows(T* dst, std::int64_t stride, const float* src, std::int64_t rows, std::int64_t d) {
    for (std::int64_t i = 0; i < rows; ++i) store_run(dst + i * stride, d, src + i * d);
}

// `rows` rows of D elements (row stride `stride`) as fp32, transposed into
// dst (D, kTile): the scores' products then take k^T and v^T row-major,
// the only layout of B that tile_mm reads.
template <class T>
TUNE_CPU_CLONES void read_transposed(const T* src, std::int64_t stride, std::int64_t rows, std::int64_t d, float* dst) {
    for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t c = 0; c < d; ++c) dst[c * kTile + r] = load(src + r * stride, c);
}

void zero(float* p, std::int64_t n) { std::fill(p, p + n, 0.0f); }

struct ExpVec {
    float operator()(float x) const { return exp_vec(x); }
};

// The online softmax over one tile of scores s (rows, cols), ld kTile, whose
// row r is query i0 + r and column c key j0 + c: turns s into
// exp(score - new max) (0 where masked), updates m and l, and rescales the
// accumulator rows (ld D) by how far each max moved.
TUNE_CPU_CLONES void online_tile(float* s, float* m, float* l, float* acc, std::int64_t rows, std::int64_t cols,
                                 std::int64_t i0, std::int64_t j0, std::int64_t d) {
    for (std::int64_t r = 0; r < rows; ++r) {
        float* row = s + r * kTile;
        // Keys j0 .. i0 + r are visible: at least one, since j0 <= i0.
        const std::int64_t seen = std::min(cols, i0 + r - j0 + 1);
        const float m_new = math::online_max(m[r], lane_max(row, seen));
        const float alpha = math::online_rescale(m[r], m_new, ExpVec{});
        for (std::int64_t c = 0; c < seen; ++c) row[c] = exp_vec(row[c] - m_new);
        for (std::int64_t c = seen; c < cols; ++c) row[c] = 0.0f;
        l[r] = alpha * l[r] + lane_sum(seen, [&](std::int64_t c) { return row[c]; });
        m[r] = m_new;
        float* a = acc + r * d;
        for (std::int64_t c = 0; c < d; ++c) a[c] *= alpha;
    }
}

// Transposed scores (cols, rows) in st, row c for key j0 + c, column r for
// query i0 + r, turned into probabilities exp(score - lse), 0 where masked.
TUNE_CPU_CLONES void probs_from_lse(float* st, const float* lse, std::int64_t rows, std::int64_t cols, std::int64_t i0,
                                    std::int64_t j0) {
    for (std::int64_t c = 0; c < cols; ++c) {
        float* row = st + c * kTile;
        const std::int64_t hidden = std::clamp<std::int64_t>(j0 + c - i0, 0, rows);  // queries before the key
        for (std::int64_t r = 0; r < hidden; ++r) row[r] = 0.0f;
        for (std::int64_t r = hidden; r < rows; ++r) row[r] = math::prob_from_lse(row[r], lse[r], ExpVec{});
    }
}

// Transposed dP (cols, rows) in dpt turned into dS^T = P^T * (dP^T - D), in place.
TUNE_CPU_CLONES void score_grads(const float* pt, float* dpt, const float* delta, std::int64_t rows,
                                 std::int64_t cols) {
    for (std::int64_t c = 0; c < cols; ++c)
        for (std::int64_t r = 0; r < rows; ++r)
            dpt[c * kTile + r] = math::softmax_score_grad(pt[c * kTile + r], dpt[c * kTile + r], delta[r]);
}

// D = rowsum(dO * O) over a query tile's rows.
template <class T>
TUNE_CPU_CLONES void row_deltas(const T* dout, std::int64_t dout_stride, const T* out, std::int64_t out_stride,
                                std::int64_t rows, std::int64_t d, float* delta) {
    for (std::int64_t r = 0; r < rows; ++r) {
        const T* g = dout + r * dout_stride;
        const T* o = out + r * out_stride;
        delta[r] = lane_sum(d, [&](std::int64_t c) { return load(g, c) * load(o, c); });
    }
}

// Where (batch b, query or kv head, row i) of a (B, S, heads, D) tensor with
// row stride `stride` starts.
template <class T>
T* at(T* base, std::int64_t b, std::int64_t seq, std::int64_t i, std::int64_t stride, std::int64_t head,
      std::int64_t d) {
    return base + (b * seq + i) * stride + head * d;
}

template <class T>
void forward_tile(const AttentionForwardArgs& a, std::int64_t b, std::int64_t h, std::int64_t i0, Scratch& w) {
    const AttentionShape& sh = a.shape;
    const std::int64_t S = sh.seq, D = sh.head_dim, g = h / (sh.heads / sh.kv_heads);
    const std::int64_t rows = std::min(kTile, S - i0);
    const float scale = 1.0f / std::sqrt(static_cast<float>(D));
    const Mat Q = read_rows(at(static_cast<const T*>(a.q), b, S, i0, a.q_stride, h, D), a.q_stride, rows, D, w.q);
    std::fill(w.m, w.m + rows, -std::numeric_limits<float>::infinity());
    zero(w.l, rows);
    zero(w.acc, rows * D);
    for (std::int64_t j0 = 0; j0 < math::causal_key_end(i0 + rows); j0 += kTile) {
        const std::int64_t cols = std::min(kTile, math::causal_key_end(i0 + rows) - j0);
        read_transposed(at(static_cast<const T*>(a.k), b, S, j0, a.k_stride, g, D), a.k_stride, cols, D, w.kt);
        const Mat V = read_rows(at(static_cast<const T*>(a.v), b, S, j0, a.v_stride, g, D), a.v_stride, cols, D, w.v);
        tile_mm(false, rows, cols, D, scale, Q, {w.kt, kTile}, 0.0f, {w.s, kTile});  // s = scale Q K^T
        online_tile(w.s, w.m, w.l, w.acc, rows, cols, i0, j0, D);
        tile_mm(false, rows, D, cols, 1.0f, {w.s, kTile}, V, 1.0f, {w.acc, D});  // acc += P V
    }
    float* lse = a.lse + (b * sh.heads + h) * S + i0;
    for (std::int64_t r = 0; r < rows; ++r) {
        const float inv = math::online_normalizer(w.l[r]);
        for (std::int64_t c = 0; c < D; ++c) w.acc[r * D + c] *= inv;
        lse[r] = math::online_lse(w.m[r], w.l[r]);
    }
    write_rows(at(static_cast<T*>(a.out), b, S, i0, a.out_stride, h, D), a.out_stride, w.acc, rows, D);
}

// Reads a query tile's q, dO (also transposed, into w.kt, w.vt), lse and
// D = rowsum(dO * O) into the scratch.
template <class T>
struct QueryTile {
    Mat Q, dO;
    const float* lse;
    std::int64_t rows;

    QueryTile(const AttentionBackwardArgs& a, std::int64_t b, std::int64_t h, std::int64_t i0, Scratch& w) {
        const AttentionShape& sh = a.shape;
        const std::int64_t S = sh.seq, D = sh.head_dim;
        rows = std::min(kTile, S - i0);
        const T* dout = at(static_cast<const T*>(a.dout), b, S, i0, a.dout_stride, h, D);
        const T* q = at(static_cast<const T*>(a.q), b, S, i0, a.q_stride, h, D);
        Q = read_rows(q, a.q_stride, rows, D, w.q);
        dO = read_rows(dout, a.dout_stride, rows, D, w.dout);
        read_transposed(q, a.q_stride, rows, D, w.kt);
        read_transposed(dout, a.dout_stride, rows, D, w.vt);
        lse = a.lse + (b * sh.heads + h) * S + i0;
        row_deltas(dout, a.dout_stride, at(static_cast<const T*>(a.out), b, S, i0, a.out_stride, h, D), a.out_stride,
                   rows, D, w.delta);
    }
};

// Probabilities and score gradients of one (query tile, key tile) pair,
// transposed (keys by queries), into w.s (P^T) and w.dp (dS^T): k and v are
// then the left operands as stored, and only the query tile, read once for
// all its key tiles, is transposed (w.kt = q^T, w.vt = dO^T).
void recompute_tile(const Mat& K, const Mat& V, const float* lse, std::int64_t rows, std::int64_t cols, std::int64_t i0,
                    std::int64_t j0, std::int64_t D, float scale, Scratch& w) {
    tile_mm(false, cols, rows, D, scale, K, {w.kt, kTile}, 0.0f, {w.s, kTile});  // S^T = scale K Q^T
    probs_from_lse(w.s, lse, rows, cols, i0, j0);
    tile_mm(false, cols, rows, D, 1.0f, V, {w.vt, kTile}, 0.0f, {w.dp, kTile});  // dP^T = V dO^T
    score_grads(w.s, w.dp, w.delta, rows, cols);
}

// One query tile of head h against every key tile it sees: dQ of the tile
// (written before returning), and its share of dK, dV added into w.dk, w.dv.
template <class T>
void query_tile_grads(const AttentionBackwardArgs& a, std::int64_t b, std::int64_t h, std::int64_t i0, Scratch& w) {
    const AttentionShape& sh = a.shape;
    const std::int64_t S = sh.seq, D = sh.head_dim, g = h / (sh.heads / sh.kv_heads);
    const float scale = 1.0f / std::sqrt(static_cast<float>(D));
    const QueryTile<T> t(a, b, h, i0, w);
    float* dQ = w.acc;
    zero(dQ, t.rows * D);
    for (std::int64_t j0 = 0; j0 < math::causal_key_end(i0 + t.rows); j0 += kTile) {
        const std::int64_t cols = std::min(kTile, math::causal_key_end(i0 + t.rows) - j0);
        const Mat K = read_rows(at(static_cast<const T*>(a.k), b, S, j0, a.k_stride, g, D), a.k_stride, cols, D, w.k);
        const Mat V = read_rows(at(static_cast<const T*>(a.v), b, S, j0, a.v_stride, g, D), a.v_stride, cols, D, w.v);
        recompute_tile(K, V, t.lse, t.rows, cols, i0, j0, D, scale, w);
        tile_mm(false, cols, D, t.rows, 1.0f, {w.s, kTile}, t.dO, 1.0f, {w.dv + j0 * D, D});   // dV += P^T dO
        tile_mm(false, cols, D, t.rows, scale, {w.dp, kTile}, t.Q, 1.0f, {w.dk + j0 * D, D});  // dK += scale dS^T Q
        tile_mm(true, t.rows, D, cols, scale, {w.dp, kTile}, K, 1.0f, {dQ, D});                // dQ += scale dS K
    }
    write_rows(at(static_cast<T*>(a.dq), b, S, i0, a.q_stride, h, D), a.q_stride, dQ, t.rows, D);
}

// dQ of the group's heads, and dK, dV of kv head g, for batch element b.
template <class T>
void backward_slab(const AttentionBackwardArgs& a, std::int64_t b, std::int64_t g, Scratch& w) {
    const AttentionShape& sh = a.shape;
    const std::int64_t S = sh.seq, D = sh.head_dim, group = sh.heads / sh.kv_heads;
    zero(w.dk, S * D);
    zero(w.dv, S * D);
    for (std::int64_t h = g * group; h < (g + 1) * group; ++h)
        for (std::int64_t i0 = 0; i0 < S; i0 += kTile) query_tile_grads<T>(a, b, h, i0, w);
    write_rows(at(static_cast<T*>(a.dk), b, S, 0, a.k_stride, g, D), a.k_stride, w.dk, S, D);
    write_rows(at(static_cast<T*>(a.dv), b, S, 0, a.v_stride, g, D), a.v_stride, w.dv, S, D);
}

// Runs body(item, scratch) for item in [0, items) on the OpenMP threads,
// each thread with its own scratch.
template <class Body>
void for_each_item(std::int64_t items, std::int64_t seq, std::int64_t head_dim, int threads, Workspace ws,
                   Body&& body) {
    const auto per_thread = static_cast<std::int64_t>(
        workspace::cpu_flash_attention_floats(static_cast<std::uint64_t>(seq), static_cast<std::uint64_t>(head_dim)));
    auto* base = static_cast<float*>(ws.ptr);
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
    for (std::int64_t i = 0; i < items; ++i) {
        Scratch w(base + omp_get_thread_num() * per_thread, seq, head_dim);
        body(i, w);
    }
}

}  // namespace

void flash_attention_forward(const AttentionForwardArgs& a, int threads, Workspace ws) {
    with_float_type(a.dtype, [&](auto t) {
        using T = decltype(t);
        const AttentionShape& sh = a.shape;
        // (batch, head, query tile), the last query tiles (the most keys) first.
        const std::int64_t slabs = sh.batch * sh.heads, tiles = (sh.seq + kTile - 1) / kTile;
        for_each_item(slabs * tiles, sh.seq, sh.head_dim, threads, ws, [&](std::int64_t i, Scratch& w) {
            const std::int64_t slab = i % slabs, tile = tiles - 1 - i / slabs;
            forward_tile<T>(a, slab / sh.heads, slab % sh.heads, tile * kTile, w);
        });
    });
}

void flash_attention_backward(const AttentionBackwardArgs& a, int threads, Workspace ws) {
    with_float_type(a.dtype, [&](auto t) {
        using T = decltype(t);
        const AttentionShape& sh = a.shape;
        for_each_item(sh.batch * sh.kv_heads, sh.seq, sh.head_dim, threads, ws,
                      [&](std::int64_t i, Scratch& w) { backward_slab<T>(a, i / sh.kv_heads, i % sh.kv_heads, w); });
    });
}

}  // namespace tune::kernels::cpu
