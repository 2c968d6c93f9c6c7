#include "kernels/cuda/host/sdpa_graph.h"

#include <fmt/format.h>

#include "kernels/error.h"
#include "kernels/workspace_bytes.h"

namespace tune::kernels::cuda::cudnn {

namespace {

DataType cudnn_type(DType t) { return t == DType::f16 ? DataType::f16 : DataType::bf16; }
std::int64_t uid(SdpaTensor t) { return static_cast<std::int64_t>(t); }

// A (B, S, heads, D) buffer with row stride `row` as {B, heads, S, D}, or
// transposed as {B, heads, D, S}.
Shape rows_strides(std::int64_t seq, std::int64_t head_dim, std::int64_t row) { return {seq * row, head_dim, row, 1}; }
Shape transposed_strides(std::int64_t seq, std::int64_t head_dim, std::int64_t row) {
    return {seq * row, head_dim, 1, row};
}

// S' = causal(Q Kᵀ · scale): the scores both graphs start from; the mask is two
// index generators, a compare and a select of the masked value.
const Descriptor& causal_scores(GraphParts& g, const Descriptor& q, const Descriptor& kt, const Descriptor& scale,
                                const Descriptor& masked, const Shape& square, const Shape& square_strides) {
    const Descriptor& s = g.tensor(DataType::f32, square, square_strides);
    g.matmul(q, kt, s);
    const Descriptor& scaled = g.tensor(DataType::f32, square, square_strides);
    g.pointwise(PointwiseMode::mul, DataType::f32, s, &scale, scaled);
    const Descriptor& query_index = g.tensor(DataType::i32, square, square_strides);
    const Descriptor& key_index = g.tensor(DataType::i32, square, square_strides);
    g.pointwise(PointwiseMode::gen_index, DataType::i32, scaled, nullptr, query_index, nullptr, 2);
    g.pointwise(PointwiseMode::gen_index, DataType::i32, scaled, nullptr, key_index, nullptr, 3);
    const Descriptor& keep = g.tensor(DataType::boolean, square, square_strides);
    g.pointwise(PointwiseMode::cmp_ge, DataType::boolean, query_index, &key_index, keep);
    const Descriptor& out = g.tensor(DataType::f32, square, square_strides);
    g.pointwise(PointwiseMode::binary_select, DataType::f32, scaled, &masked, out, &keep);
    return out;
}

// gradient = a b for key/value heads: the product itself when every query head
// has its own, else a virtual product per query head summed over each group,
// as cudnn-frontend's SDPA backward does for grouped heads
// (scaled_dot_product_flash_attention.h: dK_fullhead, dV_fullhead).
void kv_head_product(GraphParts& g, const SdpaLayout& l, const Descriptor& a, const Descriptor& b,
                     const Descriptor& gradient) {
    if (l.kv_heads == l.heads) {
        g.matmul(a, b, gradient);
        return;
    }
    const std::int64_t B = l.batch, H = l.heads, S = l.seq, D = l.head_dim;
    const Descriptor& per_query_head = g.tensor(cudnn_type(l.dtype), {B, H, S, D}, {H * S * D, S * D, D, 1});
    g.matmul(a, b, per_query_head);
    g.reduction(ReductionOperator::add, per_query_head, gradient);
}

}  // namespace

std::string sdpa_layout_problem(const SdpaLayout& l) {
    if (l.dtype != DType::bf16 && l.dtype != DType::f16)
        return fmt::format("cuDNN's fused attention takes bf16 or f16 data, not {}", dtype_name(l.dtype));
    if (l.batch <= 0 || l.heads <= 0 || l.kv_heads <= 0 || l.seq <= 0 || l.head_dim <= 0)
        return "an empty attention shape";
    if (l.heads % l.kv_heads != 0)
        return fmt::format("{} heads are not a multiple of {} key/value heads", l.heads, l.kv_heads);
    if (l.head_dim % 8 != 0 || l.head_dim > 256)
        return fmt::format("head size {} is not a multiple of 8 up to 256", l.head_dim);
    const auto below = [](std::int64_t stride, std::int64_t width) { return stride < width || stride % 8 != 0; };
    if (below(l.q_stride, l.heads * l.head_dim) || below(l.o_stride, l.heads * l.head_dim) ||
        below(l.k_stride, l.kv_heads * l.head_dim) || below(l.v_stride, l.kv_heads * l.head_dim))
        return "a row stride below its row, or not a multiple of 8 elements (16 bytes)";
    return {};
}

std::string sdpa_backward_problem(const SdpaLayout& l) {
    if (std::string problem = sdpa_layout_problem(l); !problem.empty()) return problem;
    if (l.dout_stride < l.heads * l.head_dim || l.dout_stride % 8 != 0)
        return "the output gradient's row stride is below its row, or not a multiple of 8 elements";
    return {};
}

std::int64_t sdpa_dq_accumulator_bytes(const SdpaLayout& l) {
    return static_cast<std::int64_t>(workspace::cudnn_dq_accumulator_bytes(
        static_cast<std::uint64_t>(l.batch), static_cast<std::uint64_t>(l.heads), static_cast<std::uint64_t>(l.seq),
        static_cast<std::uint64_t>(l.head_dim)));
}

SdpaForwardGraph::SdpaForwardGraph(const CudnnApi& api, const SdpaLayout& l) : parts_(api) {
    if (const std::string problem = sdpa_layout_problem(l); !problem.empty()) throw BackendError(problem);
    GraphParts& g = parts_;
    const std::int64_t B = l.batch, H = l.heads, KVH = l.kv_heads, S = l.seq, D = l.head_dim;
    const DataType io = cudnn_type(l.dtype), f32 = DataType::f32;

    const Descriptor& q = g.tensor(io, {B, H, S, D}, rows_strides(S, D, l.q_stride), uid(SdpaTensor::q));
    const Descriptor& kt = g.tensor(io, {B, KVH, D, S}, transposed_strides(S, D, l.k_stride), uid(SdpaTensor::k));
    const Descriptor& v = g.tensor(io, {B, KVH, S, D}, rows_strides(S, D, l.v_stride), uid(SdpaTensor::v));
    const Descriptor& o = g.tensor(io, {B, H, S, D}, rows_strides(S, D, l.o_stride), uid(SdpaTensor::o));
    const Descriptor& stats = g.tensor(f32, {B, H, S, 1}, {H * S, S, 1, 1}, uid(SdpaTensor::stats));
    const Descriptor& scale = g.tensor(f32, {1, 1, 1, 1}, {1, 1, 1, 1}, uid(SdpaTensor::scale), true);
    const Descriptor& masked = g.tensor(f32, {1, 1, 1, 1}, {1, 1, 1, 1}, uid(SdpaTensor::masked_value), true);

    const Shape square{B, H, S, S}, square_strides{H * S * S, S * S, S, 1};
    const Shape row{B, H, S, 1}, row_strides{H * S, S, 1, 1};

    const Descriptor& causal = causal_scores(g, q, kt, scale, masked, square, square_strides);

    const Descriptor& m = g.tensor(f32, row, row_strides);
    g.reduction(ReductionOperator::max, causal, m);
    const Descriptor& shifted = g.tensor(f32, square, square_strides);
    g.pointwise(PointwiseMode::sub, f32, causal, &m, shifted);
    const Descriptor& e = g.tensor(f32, square, square_strides);
    g.pointwise(PointwiseMode::exp, f32, shifted, nullptr, e);
    const Descriptor& sum = g.tensor(f32, row, row_strides);
    g.reduction(ReductionOperator::add, e, sum);
    const Descriptor& log_sum = g.tensor(f32, row, row_strides);
    g.pointwise(PointwiseMode::log, f32, sum, nullptr, log_sum);
    g.pointwise(PointwiseMode::add, f32, m, &log_sum, stats);
    const Descriptor& p = g.tensor(io, square, square_strides);  // the second product's A type is the data's
    g.pointwise(PointwiseMode::div, f32, e, &sum, p);
    g.matmul(p, v, o);
}

SdpaBackwardGraph::SdpaBackwardGraph(const CudnnApi& api, const SdpaLayout& l) : parts_(api) {
    if (const std::string problem = sdpa_backward_problem(l); !problem.empty()) throw BackendError(problem);
    GraphParts& g = parts_;
    const std::int64_t B = l.batch, H = l.heads, KVH = l.kv_heads, S = l.seq, D = l.head_dim;
    const DataType io = cudnn_type(l.dtype), f32 = DataType::f32;
    const Shape one_element{1, 1, 1, 1};

    const Descriptor& q = g.tensor(io, {B, H, S, D}, rows_strides(S, D, l.q_stride), uid(SdpaTensor::q));
    const Descriptor& kt = g.tensor(io, {B, KVH, D, S}, transposed_strides(S, D, l.k_stride), uid(SdpaTensor::k));
    const Descriptor& vt = g.tensor(io, {B, KVH, D, S}, transposed_strides(S, D, l.v_stride), uid(SdpaTensor::v));
    const Descriptor& o = g.tensor(io, {B, H, S, D}, rows_strides(S, D, l.o_stride), uid(SdpaTensor::o));
    const Descriptor& dout = g.tensor(io, {B, H, S, D}, rows_strides(S, D, l.dout_stride), uid(SdpaTensor::dout));
    const Descriptor& stats = g.tensor(f32, {B, H, S, 1}, {H * S, S, 1, 1}, uid(SdpaTensor::stats));
    const Descriptor& dq = g.tensor(io, {B, H, S, D}, rows_strides(S, D, l.q_stride), uid(SdpaTensor::dq));
    const Descriptor& dk = g.tensor(io, {B, KVH, S, D}, rows_strides(S, D, l.k_stride), uid(SdpaTensor::dk));
    const Descriptor& dv = g.tensor(io, {B, KVH, S, D}, rows_strides(S, D, l.v_stride), uid(SdpaTensor::dv));
    const Descriptor& scale = g.tensor(f32, one_element, one_element, uid(SdpaTensor::scale), true);
    const Descriptor& masked = g.tensor(f32, one_element, one_element, uid(SdpaTensor::masked_value), true);
    const Descriptor& one = g.tensor(f32, one_element, one_element, uid(SdpaTensor::one), true);
    const Descriptor& dq_sum = g.tensor(f32, {B, H, S, D}, {H * S * D, S * D, D, 1}, uid(SdpaTensor::dq_accumulator),
                                        false, TensorReordering::f16x16);

    const Shape square{B, H, S, S}, square_strides{H * S * S, S * S, S, 1};
    const Shape swapped{B, H, S, S}, swapped_strides{H * S * S, S * S, 1, S};  // the same elements, transposed
    const Shape row{B, H, S, 1}, row_strides{H * S, S, 1, 1};

    // D = rowsum(dO · O), through a multiply by one as cuDNN's pattern expects.
    const Descriptor& product = g.tensor(f32, {B, H, S, D}, {H * S * D, S * D, D, 1});
    g.pointwise(PointwiseMode::mul, f32, dout, &o, product);
    const Descriptor& row_sum = g.tensor(f32, row, row_strides);
    g.reduction(ReductionOperator::add, product, row_sum);
    const Descriptor& d = g.tensor(f32, row, row_strides);
    g.pointwise(PointwiseMode::mul, f32, row_sum, &one, d);

    // P = exp(S' - stats), recomputed; dV = Pᵀ dO.
    const Descriptor& causal = causal_scores(g, q, kt, scale, masked, square, square_strides);
    const Descriptor& shifted = g.tensor(f32, square, square_strides);
    g.pointwise(PointwiseMode::sub, f32, causal, &stats, shifted);
    const Descriptor& p = g.tensor(io, square, square_strides);
    g.pointwise(PointwiseMode::exp, f32, shifted, nullptr, p);
    const Descriptor& pt = g.tensor(io, swapped, swapped_strides);
    g.reshape(p, pt);
    kv_head_product(g, l, pt, dout, dv);

    // dS = P · (dO Vᵀ - D) · scale; dK = dSᵀ Q.
    const Descriptor& dp = g.tensor(f32, square, square_strides);
    g.matmul(dout, vt, dp);
    const Descriptor& dp_kept = g.tensor(f32, square, square_strides);
    g.pointwise(PointwiseMode::mul, f32, dp, &one, dp_kept);
    const Descriptor& centred = g.tensor(f32, square, square_strides);
    g.pointwise(PointwiseMode::sub, f32, dp_kept, &d, centred);
    const Descriptor& weighted = g.tensor(f32, square, square_strides);
    g.pointwise(PointwiseMode::mul, f32, centred, &p, weighted);
    const Descriptor& ds = g.tensor(f32, square, square_strides);
    g.pointwise(PointwiseMode::mul, f32, weighted, &scale, ds);
    const Descriptor& dst = g.tensor(f32, swapped, swapped_strides);
    g.reshape(ds, dst);
    kv_head_product(g, l, dst, q, dk);

    // dQ = dS K, accumulated in fp32, then stored in the data's type.
    const Descriptor& k = g.tensor(io, {B, KVH, S, D}, rows_strides(S, D, l.k_stride));
    g.reshape(kt, k);
    g.matmul(ds, k, dq_sum);
    g.pointwise(PointwiseMode::identity, f32, dq_sum, nullptr, dq);
}

}  // namespace tune::kernels::cuda::cudnn
