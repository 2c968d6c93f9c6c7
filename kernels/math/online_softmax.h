// The rules of flash attention's online softmax (Milakov & Gimelshein 2018;
// FlashAttention-2), shared by the CPU and CUDA backends. A query row keeps a
// running maximum m and a running sum l of exp(score - m) over the key tiles
// seen so far; its output accumulator is rescaled whenever m grows. The
// forward stores lse = m + log(l) per row; the backward recomputes each
// probability from its score and lse. `Exp` is the backend's exp (the CPU's
// vectorizable one, expf on the device), so both apply the same formulas.
#pragma once

#include <math.h>

#include <cstdint>

#include "kernels/math/hd.h"

namespace tune::kernels::math {

// Causal: query i sees keys j <= i.
TUNE_HD inline bool causal_visible(std::int64_t i, std::int64_t j) { return j <= i; }

// The key columns a query tile [i0, i1) reads: [0, i1). Key tiles starting
// at or beyond i1 are fully masked and skipped.
TUNE_HD inline std::int64_t causal_key_end(std::int64_t i1) { return i1; }

// The first query row that sees any key of a tile starting at j0.
TUNE_HD inline std::int64_t causal_query_begin(std::int64_t j0) { return j0; }

// The running maximum after a tile whose largest visible score is tile_max.
TUNE_HD inline float online_max(float m, float tile_max) { return tile_max > m ? tile_max : m; }

// The factor the running sum and accumulator are multiplied by when the
// maximum moves from m_old to m_new: exp(m_old - m_new), and 0 when no key
// was seen yet (m_old = -inf, whose difference would be nan for m_new = -inf).
template <class Exp>
TUNE_HD inline float online_rescale(float m_old, float m_new, Exp exp_fn) {
    return m_old == -INFINITY ? 0.0f : exp_fn(m_old - m_new);
}

// The row's log-sum-exp at the end of the key tiles. Every causal row sees
// at least its own key, so l >= 1.
TUNE_HD inline float online_lse(float m, float l) { return m + logf(l); }

// The output's factor: 1 / l.
TUNE_HD inline float online_normalizer(float l) { return 1.0f / l; }

// A probability recomputed in backward from its scaled score and its row's lse.
template <class Exp>
TUNE_HD inline float prob_from_lse(float score, float lse, Exp exp_fn) {
    return exp_fn(score - lse);
}

// dS = P * (dP - D) with D = rowsum(dO * O) = rowsum(P * dP) (softmax backward).
TUNE_HD inline float softmax_score_grad(float p, float dp, float delta) { return p * (dp - delta); }

}  // namespace tune::kernels::math
