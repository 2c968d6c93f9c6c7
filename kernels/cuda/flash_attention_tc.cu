// Causal flash attention on tensor cores (nvcuda::wmma, m16n16k16, bf16 or
// fp16 operands, fp32 accumulators) for head dims 64 and 128. The order and
// the online-softmax rules are those of flash_attention.cu and
// kernels/math/online_softmax.h; softmax statistics and every accumulator
// stay fp32, and only P and dS are rounded to the storage type to enter the
// second product (as FlashAttention-2 does).
//
// A block has W warps (4, or 2 at head dim 128 to keep static shared memory
// under 48 KiB); each warp owns 16 rows of the block's outer tile and works
// on them alone between the block barriers that stage the inner tile:
//   forward:   outer = queries, inner = 32 keys; O (16, D) per warp in
//              registers, lane (r, half) owning row r's columns
//              half * 8 .. +8 of each 16-column chunk, the same row whose
//              softmax it computes.
//   dK, dV:    outer = keys of one KV head, inner = 32 queries of each head
//              of its group; dK and dV in accumulator fragments.
//   dQ:        outer = queries, inner = 32 keys; dQ in accumulator
//              fragments. Run after dK, dV, so dQ may alias dO.
// Tiles are staged in shared memory as WMMA operands, zero past S, rows
// padded by 8 elements against bank conflicts. Offsets are 64-bit.
#include <math.h>

#include <type_traits>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/flash_attention.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/wmma_operand.cuh"
#include "kernels/math/online_softmax.h"

namespace tune::kernels::cuda {

namespace {

namespace wmma = nvcuda::wmma;
using Accumulator = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;

constexpr int kRows = 16;               // outer rows per warp: one WMMA tile
constexpr int kInner = 32;              // inner rows per step
constexpr int kScoreLd = kInner + 4;    // fp32 scratch row, padded
constexpr int kOperandLd = kInner + 8;  // 16-bit P or dS row, padded
constexpr unsigned kFull = 0xffffffffu;

template <int D>
constexpr int warps_for() {
    return D >= 128 ? 2 : 4;
}

// A kernel's storage type and head dim (one template argument, so TUNE_LAUNCH takes it whole).
template <class T, int D>
struct Tile {
    using Storage = T;
    static constexpr int kD = D;
};

// Each warp's scratch: a (16, kInner) fp32 product and its (16, kInner)
// 16-bit operand (P or dS).
template <class Tc, int W>
struct WarpScratch {
    alignas(32) float s[W][kRows * kScoreLd];
    alignas(32) Tc p[W][kRows * kOperandLd];
};

template <class Tc, int D>
struct ForwardShared {
    static constexpr int kWarps = warps_for<D>(), kLd = D + 8;
    alignas(32) Tc q[kWarps * kRows * kLd];
    alignas(32) Tc k[kInner * kLd];
    alignas(32) Tc v[kInner * kLd];
    WarpScratch<Tc, kWarps> w;
};

// Backward: outer (W * 16 rows) and inner (kInner rows) tiles, two each,
// and the query rows' lse and D = rowsum(dO * O) (inner for dK/dV, outer for dQ).
template <class Tc, int D>
struct BackwardShared {
    static constexpr int kWarps = warps_for<D>(), kLd = D + 8;
    static constexpr int kStats = kWarps * kRows > kInner ? kWarps* kRows : kInner;
    alignas(32) Tc outer_a[kWarps * kRows * kLd];
    alignas(32) Tc outer_b[kWarps * kRows * kLd];
    alignas(32) Tc inner_a[kInner * kLd];
    alignas(32) Tc inner_b[kInner * kLd];
    WarpScratch<Tc, kWarps> w;
    float lse[kStats], delta[kStats];
};

static_assert(sizeof(ForwardShared<__half, 128>) <= 48 * 1024 && sizeof(ForwardShared<__half, 64>) <= 48 * 1024);
static_assert(sizeof(BackwardShared<__half, 128>) <= 48 * 1024 && sizeof(BackwardShared<__half, 64>) <= 48 * 1024);

// rows x D elements of a (B, S, heads, D) tensor from row i0 of `head` into tile (ld D + 8); zero past S.
template <int D, class T>
__device__ void stage(WmmaOperandT<T>* tile, const void* base, std::int64_t b, std::int64_t i0, int rows,
                      std::int64_t stride, std::int64_t head, std::int64_t seq) {
    const T* src = static_cast<const T*>(base);
    for (int e = static_cast<int>(threadIdx.x); e < rows * D; e += static_cast<int>(blockDim.x)) {
        const int r = e / D, c = e % D;
        const std::int64_t i = i0 + r;
        tile[r * (D + 8) + c] = to_operand(i < seq ? src[(b * seq + i) * stride + head * D + c] : T{0});
    }
}

// s (16, kInner) = A B^T over D: A the warp's 16 rows, B kInner rows, both (rows, D) tiles (ld D + 8).
template <int D, class Tc>
__device__ void product_abt(float* s, const Tc* a, const Tc* b) {
    constexpr int ld = D + 8;
    TUNE_UNROLL
    for (int n = 0; n < kInner / 16; ++n) {
        Accumulator acc;
        wmma::fill_fragment(acc, 0.0f);
        TUNE_UNROLL
        for (int x = 0; x < D / 16; ++x) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, Tc, wmma::row_major> fa;
            wmma::fragment<wmma::matrix_b, 16, 16, 16, Tc, wmma::col_major> fb;  // B^T: (x, j) = B[j][x]
            wmma::load_matrix_sync(fa, a + x * 16, ld);
            wmma::load_matrix_sync(fb, b + n * 16 * ld + x * 16, ld);
            wmma::mma_sync(acc, fa, fb, acc);
        }
        wmma::store_matrix_sync(s + n * 16, acc, kScoreLd, wmma::mem_row_major);
    }
}

// The warp's (16, kInner) operand P or dS as two A fragments.
template <class Tc>
struct OperandRows {
    wmma::fragment<wmma::matrix_a, 16, 16, 16, Tc, wmma::row_major> f[kInner / 16];
    __device__ explicit OperandRows(const Tc* p) {
        TUNE_UNROLL
        for (int k = 0; k < kInner / 16; ++k) wmma::load_matrix_sync(f[k], p + k * 16, kOperandLd);
    }
};

// acc += A B[:, n*16 .. +16): A the warp's (16, kInner) operand, B a (kInner, D) tile (ld D + 8).
template <int D, class Tc>
__device__ void product_ab_chunk(Accumulator& acc, const OperandRows<Tc>& a, const Tc* b, int n) {
    TUNE_UNROLL
    for (int k = 0; k < kInner / 16; ++k) {
        wmma::fragment<wmma::matrix_b, 16, 16, 16, Tc, wmma::row_major> fb;
        wmma::load_matrix_sync(fb, b + k * 16 * (D + 8) + n * 16, D + 8);
        wmma::mma_sync(acc, a.f[k], fb, acc);
    }
}

// acc (16, D) += A B over the kInner rows.
template <int D, class Tc>
__device__ void accumulate_ab(Accumulator (&acc)[D / 16], const Tc* a, const Tc* b) {
    const OperandRows<Tc> rows(a);
    TUNE_UNROLL
    for (int n = 0; n < D / 16; ++n) product_ab_chunk<D>(acc[n], rows, b, n);
}

// Writes factor * acc, the warp's 16 rows from `first` (those below S), through its scratch.
template <int D, class T>
__device__ void write_rows(void* out, const Accumulator (&acc)[D / 16], float* s, float factor, std::int64_t first,
                           std::int64_t b, std::int64_t stride, std::int64_t head, std::int64_t seq) {
    const int lane = static_cast<int>(threadIdx.x % 32);
    TUNE_UNROLL
    for (int n = 0; n < D / 16; ++n) {
        __syncwarp();  // the previous chunk is read
        wmma::store_matrix_sync(s, acc[n], kScoreLd, wmma::mem_row_major);
        __syncwarp();
        for (int e = lane; e < kRows * 16; e += 32) {
            const int r = e / 16, c = e % 16;
            const std::int64_t i = first + r;
            if (i < seq)
                store(static_cast<T*>(out), (b * seq + i) * stride + head * D + n * 16 + c,
                      factor * s[r * kScoreLd + c]);
        }
    }
}

// lse and D = rowsum(dO * O) of query rows [i0, i0 + rows), blockDim / rows threads per row
// (consecutive lanes, summed by shuffles); 0 past S.
template <int D, class T>
__device__ void stage_stats(float* lse, float* delta, const FlashArgs& a, std::int64_t b, std::int64_t h,
                            std::int64_t i0, int rows) {
    const int per_row = static_cast<int>(blockDim.x) / rows;
    const int r = static_cast<int>(threadIdx.x) / per_row, part = static_cast<int>(threadIdx.x) % per_row;
    const std::int64_t i = i0 + r;
    float d = 0.0f;
    if (i < a.seq) {
        const std::int64_t row_o = (b * a.seq + i) * a.out_stride + h * D;
        const std::int64_t row_g = (b * a.seq + i) * a.dout_stride + h * D;
        for (int c = part; c < D; c += per_row)
            d += load(static_cast<const T*>(a.dout), row_g + c) * load(static_cast<const T*>(a.out), row_o + c);
    }
    for (int offset = 1; offset < per_row; offset *= 2) d += __shfl_xor_sync(kFull, d, offset);
    if (part == 0) {
        delta[r] = d;
        lse[r] = i < a.seq ? a.lse_in[(b * a.heads + h) * a.seq + i] : 0.0f;
    }
}

template <class Shape>
__global__ void flash_forward_tc_kernel(FlashArgs a) {
    using T = typename Shape::Storage;
    constexpr int D = Shape::kD;
    using Tc = WmmaOperandT<T>;
    using Shared = ForwardShared<Tc, D>;
    constexpr int W = Shared::kWarps, ld = Shared::kLd;
    __shared__ Shared sm;
    const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
    const int r = lane / 2, half = lane % 2;  // this lane's row and half of the columns
    const std::int64_t i0 = static_cast<std::int64_t>(blockIdx.x) * W * kRows, h = blockIdx.y, b = blockIdx.z;
    const std::int64_t g = h / (a.heads / a.kv_heads), first = i0 + warp * kRows, i = first + r;
    float* s = sm.w.s[warp];
    Tc* p = sm.w.p[warp];
    stage<D, T>(sm.q, a.q, b, i0, W * kRows, a.q_stride, h, a.seq);
    float o[D / 16][8] = {};
    float m = -INFINITY, l = 0.0f;
    const std::int64_t key_end = math::causal_key_end(i0 + W * kRows < a.seq ? i0 + W * kRows : a.seq);
    for (std::int64_t j0 = 0; j0 < key_end; j0 += kInner) {
        __syncthreads();  // the previous tile is consumed
        stage<D, T>(sm.k, a.k, b, j0, kInner, a.k_stride, g, a.seq);
        stage<D, T>(sm.v, a.v, b, j0, kInner, a.v_stride, g, a.seq);
        __syncthreads();
        if (first >= a.seq || j0 >= math::causal_key_end(first + kRows)) continue;  // warp-uniform: all masked
        product_abt<D>(s, sm.q + warp * kRows * ld, sm.k);
        __syncwarp();
        float x[16];
        float tile_max = -INFINITY;
        TUNE_UNROLL
        for (int c = 0; c < 16; ++c) {
            const std::int64_t j = j0 + half * 16 + c;
            const bool seen = j < a.seq && math::causal_visible(i, j);
            x[c] = seen ? a.scale * s[r * kScoreLd + half * 16 + c] : -INFINITY;
            tile_max = fmaxf(tile_max, x[c]);
        }
        tile_max = fmaxf(tile_max, __shfl_xor_sync(kFull, tile_max, 1));
        const float m_new = math::online_max(m, tile_max);
        // A row that has seen no key yet keeps m = -inf and exponentiates nothing.
        const float alpha = m_new == -INFINITY ? 1.0f : math::online_rescale(m, m_new, DeviceExp{});
        float sum = 0.0f;
        TUNE_UNROLL
        for (int c = 0; c < 16; ++c) {
            const float pr = x[c] == -INFINITY ? 0.0f : expf(x[c] - m_new);
            p[r * kOperandLd + half * 16 + c] = to_operand(::tune::math::from_float<T>(pr));
            sum += pr;
        }
        sum += __shfl_xor_sync(kFull, sum, 1);
        l = alpha * l + sum;
        m = m_new;
        __syncwarp();  // P is written; the scores are read
        const OperandRows<Tc> prob(p);
        TUNE_UNROLL
        for (int n = 0; n < D / 16; ++n) {  // O = alpha O + P V, a 16-column chunk at a time
            Accumulator acc;
            wmma::fill_fragment(acc, 0.0f);
            product_ab_chunk<D>(acc, prob, sm.v, n);
            wmma::store_matrix_sync(s, acc, kScoreLd, wmma::mem_row_major);
            __syncwarp();
            TUNE_UNROLL
            for (int e = 0; e < 8; ++e) o[n][e] = alpha * o[n][e] + s[r * kScoreLd + half * 8 + e];
            __syncwarp();
        }
    }
    if (i >= a.seq) return;
    const float inv = l > 0.0f ? math::online_normalizer(l) : 0.0f;
    const std::int64_t row = (b * a.seq + i) * a.out_stride + h * D + half * 8;
    TUNE_UNROLL
    for (int n = 0; n < D / 16; ++n) {
        TUNE_UNROLL
        for (int e = 0; e < 8; ++e) store(static_cast<T*>(a.o), row + n * 16 + e, o[n][e] * inv);
    }
    if (half == 0) a.lse[(b * a.heads + h) * a.seq + i] = math::online_lse(m, l);
}

// P (into probs) and, with dP in s, dS (into p) of one warp's (16, kInner) tile, lane (r, half).
// Rows of s: the warp's outer rows; columns: the inner rows. `query_of(r, c)` and `key_of(r, c)`
// name the element's query and key; `stat(r, c)` its query's index into lse and delta.
template <class T, class Tc, class Query, class Key, class Stat>
__device__ void probabilities(float (&probs)[16], const float* s, Tc* p, const FlashArgs& a, const float* lse,
                              Query query_of, Key key_of, Stat stat) {
    const int lane = static_cast<int>(threadIdx.x % 32), r = lane / 2, half = lane % 2;
    TUNE_UNROLL
    for (int c = 0; c < 16; ++c) {
        const int col = half * 16 + c;
        const std::int64_t i = query_of(r, col), j = key_of(r, col);
        const bool seen = i < a.seq && j < a.seq && math::causal_visible(i, j);
        probs[c] = seen ? math::prob_from_lse(a.scale * s[r * kScoreLd + col], lse[stat(r, col)], DeviceExp{}) : 0.0f;
        p[r * kOperandLd + col] = to_operand(::tune::math::from_float<T>(probs[c]));
    }
}

template <class T, class Tc, class Stat>
__device__ void score_grads(const float (&probs)[16], const float* dp, Tc* p, const float* delta, Stat stat) {
    const int lane = static_cast<int>(threadIdx.x % 32), r = lane / 2, half = lane % 2;
    TUNE_UNROLL
    for (int c = 0; c < 16; ++c) {
        const int col = half * 16 + c;
        const float ds = math::softmax_score_grad(probs[c], dp[r * kScoreLd + col], delta[stat(r, col)]);
        p[r * kOperandLd + col] = to_operand(::tune::math::from_float<T>(ds));
    }
}

template <class Shape>
__global__ void flash_key_grads_tc_kernel(FlashArgs a) {
    using T = typename Shape::Storage;
    constexpr int D = Shape::kD;
    using Tc = WmmaOperandT<T>;
    using Shared = BackwardShared<Tc, D>;
    constexpr int W = Shared::kWarps, ld = Shared::kLd;
    __shared__ Shared sm;
    const int warp = static_cast<int>(threadIdx.x / 32);
    const std::int64_t j0 = static_cast<std::int64_t>(blockIdx.x) * W * kRows, g = blockIdx.y, b = blockIdx.z;
    const std::int64_t group = a.heads / a.kv_heads, first = j0 + warp * kRows;  // the warp's first key
    float* s = sm.w.s[warp];
    Tc* p = sm.w.p[warp];
    Tc *k = sm.outer_a, *v = sm.outer_b, *q = sm.inner_a, *dout = sm.inner_b;
    stage<D, T>(k, a.k, b, j0, W * kRows, a.k_stride, g, a.seq);
    stage<D, T>(v, a.v, b, j0, W * kRows, a.v_stride, g, a.seq);
    Accumulator dk[D / 16], dv[D / 16];
    TUNE_UNROLL
    for (int n = 0; n < D / 16; ++n) wmma::fill_fragment(dk[n], 0.0f), wmma::fill_fragment(dv[n], 0.0f);
    for (std::int64_t h = g * group; h < (g + 1) * group; ++h) {
        for (std::int64_t i0 = math::causal_query_begin(j0); i0 < a.seq; i0 += kInner) {
            __syncthreads();  // the previous query tile is consumed
            stage<D, T>(q, a.q, b, i0, kInner, a.q_stride, h, a.seq);
            stage<D, T>(dout, a.dout, b, i0, kInner, a.dout_stride, h, a.seq);
            stage_stats<D, T>(sm.lse, sm.delta, a, b, h, i0, kInner);
            __syncthreads();
            if (first >= a.seq || i0 + kInner <= math::causal_query_begin(first)) continue;  // warp-uniform
            // Transposed tiles: rows are the warp's keys, columns the tile's queries.
            auto query_of = [&](int, int c) { return i0 + c; };
            auto key_of = [&](int r, int) { return first + r; };
            auto stat = [](int, int c) { return c; };
            product_abt<D>(s, k + warp * kRows * ld, q);  // S^T
            __syncwarp();
            float probs[16];
            probabilities<T>(probs, s, p, a, sm.lse, query_of, key_of, stat);
            __syncwarp();
            accumulate_ab<D>(dv, p, dout);                   // dV += P^T dO
            product_abt<D>(s, v + warp * kRows * ld, dout);  // dP^T
            __syncwarp();                                    // dP^T is stored; P^T is read
            score_grads<T>(probs, s, p, sm.delta, stat);
            __syncwarp();
            accumulate_ab<D>(dk, p, q);  // dK += dS^T Q (times scale at the end)
        }
    }
    write_rows<D, T>(a.dk, dk, s, a.scale, first, b, a.k_stride, g, a.seq);
    write_rows<D, T>(a.dv, dv, s, 1.0f, first, b, a.v_stride, g, a.seq);
}

template <class Shape>
__global__ void flash_query_grads_tc_kernel(FlashArgs a) {
    using T = typename Shape::Storage;
    constexpr int D = Shape::kD;
    using Tc = WmmaOperandT<T>;
    using Shared = BackwardShared<Tc, D>;
    constexpr int W = Shared::kWarps, ld = Shared::kLd;
    __shared__ Shared sm;
    const int warp = static_cast<int>(threadIdx.x / 32);
    const std::int64_t i0 = static_cast<std::int64_t>(blockIdx.x) * W * kRows, h = blockIdx.y, b = blockIdx.z;
    const std::int64_t g = h / (a.heads / a.kv_heads), first = i0 + warp * kRows;  // the warp's first query
    float* s = sm.w.s[warp];
    Tc* p = sm.w.p[warp];
    Tc *q = sm.outer_a, *dout = sm.outer_b, *k = sm.inner_a, *v = sm.inner_b;
    stage<D, T>(q, a.q, b, i0, W * kRows, a.q_stride, h, a.seq);
    stage<D, T>(dout, a.dout, b, i0, W * kRows, a.dout_stride, h, a.seq);
    stage_stats<D, T>(sm.lse, sm.delta, a, b, h, i0, W * kRows);
    Accumulator dq[D / 16];
    TUNE_UNROLL
    for (int n = 0; n < D / 16; ++n) wmma::fill_fragment(dq[n], 0.0f);
    const std::int64_t key_end = math::causal_key_end(i0 + W * kRows < a.seq ? i0 + W * kRows : a.seq);
    for (std::int64_t j0 = 0; j0 < key_end; j0 += kInner) {
        __syncthreads();  // the previous key tile is consumed (and, first, q, dO and the stats are staged)
        stage<D, T>(k, a.k, b, j0, kInner, a.k_stride, g, a.seq);
        stage<D, T>(v, a.v, b, j0, kInner, a.v_stride, g, a.seq);
        __syncthreads();
        if (first >= a.seq || j0 >= math::causal_key_end(first + kRows)) continue;  // warp-uniform
        auto query_of = [&](int r, int) { return first + r; };
        auto key_of = [&](int, int c) { return j0 + c; };
        auto stat = [&](int r, int) { return warp * kRows + r; };
        product_abt<D>(s, q + warp * kRows * ld, k);  // S
        __syncwarp();
        float probs[16];
        probabilities<T>(probs, s, p, a, sm.lse, query_of, key_of, stat);
        __syncwarp();                                    // S is read
        product_abt<D>(s, dout + warp * kRows * ld, v);  // dP
        __syncwarp();
        score_grads<T>(probs, s, p, sm.delta, stat);
        __syncwarp();
        accumulate_ab<D>(dq, p, k);  // dQ += dS K (times scale at the end)
    }
    write_rows<D, T>(a.dq, dq, s, a.scale, first, b, a.q_stride, h, a.seq);
}

template <int D>
dim3 grid_of(const FlashArgs& a, std::int64_t heads, std::int64_t batch) {
    constexpr std::int64_t rows = warps_for<D>() * kRows;
    return dim3(static_cast<unsigned>((a.seq + rows - 1) / rows), static_cast<unsigned>(heads),
                static_cast<unsigned>(batch));
}

// f(T{}, D) for the dtype and head dim flash_tensor_cores() accepts.
template <class F>
void with_tensor_core_shape(DType dtype, std::int64_t head_dim, F&& f) {
    auto by_dim = [&](auto tag) {
        if (head_dim == 64)
            f(tag, std::integral_constant<int, 64>{});
        else
            f(tag, std::integral_constant<int, 128>{});
    };
    if (dtype == DType::bf16)
        by_dim(::tune::math::bf16{});
    else
        by_dim(::tune::math::fp16{});
}

}  // namespace

void flash_forward_tensor_cores(const FlashArgs& a, DType dtype, std::int64_t batch, cudaStream_t stream) {
    with_tensor_core_shape(dtype, a.head_dim, [&](auto tag, auto dim) {
        using T = decltype(tag);
        constexpr int D = decltype(dim)::value;
        using Shape = Tile<T, D>;
        TUNE_LAUNCH(flash_forward_tc_kernel<Shape>, grid_of<D>(a, a.heads, batch), 32 * warps_for<D>(), 0, stream)(a);
    });
    TUNE_CUDA_CHECK_LAUNCH("flash_forward_tc_kernel");
}

void flash_backward_tensor_cores(const FlashArgs& a, DType dtype, std::int64_t batch, cudaStream_t stream) {
    with_tensor_core_shape(dtype, a.head_dim, [&](auto tag, auto dim) {
        using T = decltype(tag);
        constexpr int D = decltype(dim)::value;
        // dK, dV first: dQ may alias dO, which every key tile reads.
        using Shape = Tile<T, D>;
        TUNE_LAUNCH(flash_key_grads_tc_kernel<Shape>, grid_of<D>(a, a.kv_heads, batch), 32 * warps_for<D>(), 0, stream)
        (a);
        TUNE_CUDA_CHECK_LAUNCH("flash_key_grads_tc_kernel");
        TUNE_LAUNCH(flash_query_grads_tc_kernel<Shape>, grid_of<D>(a, a.heads, batch), 32 * warps_for<D>(), 0, stream)
        (a);
        TUNE_CUDA_CHECK_LAUNCH("flash_query_grads_tc_kernel");
    });
}

}  // namespace tune::kernels::cuda
