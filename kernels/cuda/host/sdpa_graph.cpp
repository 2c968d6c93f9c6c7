#include "kernels/cuda/host/sdpa_graph.h"

#include <fmt/format.h>

#include "kernels/error.h"

namespace tune::kernels::cuda::cudnn {

namespace {

constexpr std::int64_t kAlignment = 16;  // bytes: the 16-byte vector loads cuDNN's attention engines use

DataType cudnn_type(DType t) { return t == DType::f16 ? DataType::f16 : DataType::bf16; }

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

const Descriptor& SdpaForwardGraph::tensor(DataType type, std::vector<std::int64_t> dims,
                                           std::vector<std::int64_t> strides, std::int64_t uid, bool by_value) {
    const bool is_virtual = uid == 0;
    Descriptor& d = tensors_.emplace_back(*api_, DescriptorType::tensor, SourceLine::here());
    d.set(Attribute::tensor_unique_id, is_virtual ? next_virtual_uid_++ : uid)
        .set(Attribute::tensor_data_type, type)
        .set(Attribute::tensor_dimensions, dims)
        .set(Attribute::tensor_strides, strides)
        .set(Attribute::tensor_byte_alignment, kAlignment)
        .set(Attribute::tensor_is_virtual, is_virtual);
    if (by_value) d.set(Attribute::tensor_is_by_value, true);
    return d.finalize();
}

const Descriptor& SdpaForwardGraph::pointwise(PointwiseMode mode, DataType compute, const Descriptor& x,
                                              const Descriptor* b, const Descriptor& y, const Descriptor* t,
                                              std::int64_t axis) {
    Descriptor& how = settings_.emplace_back(*api_, DescriptorType::pointwise, SourceLine::here());
    how.set(Attribute::pointwise_mode, mode).set(Attribute::pointwise_math_precision, compute);
    if (axis >= 0) how.set(Attribute::pointwise_axis, axis);
    how.finalize();
    Descriptor& op = operations_.emplace_back(*api_, DescriptorType::operation_pointwise, SourceLine::here());
    op.set(Attribute::operation_pointwise_descriptor, how).set(Attribute::operation_pointwise_x, x);
    if (b != nullptr) op.set(Attribute::operation_pointwise_b, *b);
    if (t != nullptr) op.set(Attribute::operation_pointwise_t, *t);
    op.set(Attribute::operation_pointwise_y, y);
    return op.finalize();
}

void SdpaForwardGraph::matmul(const Descriptor& a, const Descriptor& b, const Descriptor& c) {
    Descriptor& how = settings_.emplace_back(*api_, DescriptorType::matmul, SourceLine::here());
    how.set(Attribute::matmul_compute_type, DataType::f32).finalize();
    operations_.emplace_back(*api_, DescriptorType::operation_matmul, SourceLine::here())
        .set(Attribute::operation_matmul_a, a)
        .set(Attribute::operation_matmul_b, b)
        .set(Attribute::operation_matmul_c, c)
        .set(Attribute::operation_matmul_descriptor, how)
        .finalize();
}

void SdpaForwardGraph::reduction(ReductionOperator op, const Descriptor& x, const Descriptor& y) {
    Descriptor& how = settings_.emplace_back(*api_, DescriptorType::reduction, SourceLine::here());
    how.set(Attribute::reduction_operator, op).set(Attribute::reduction_compute_type, DataType::f32).finalize();
    operations_.emplace_back(*api_, DescriptorType::operation_reduction, SourceLine::here())
        .set(Attribute::operation_reduction_x, x)
        .set(Attribute::operation_reduction_y, y)
        .set(Attribute::operation_reduction_descriptor, how)
        .finalize();
}

SdpaForwardGraph::SdpaForwardGraph(const CudnnApi& api, const SdpaLayout& l) : api_(&api), layout_(l) {
    if (const std::string problem = sdpa_layout_problem(l); !problem.empty()) throw BackendError(problem);
    const std::int64_t B = l.batch, H = l.heads, KVH = l.kv_heads, S = l.seq, D = l.head_dim;
    const DataType io = cudnn_type(l.dtype), f32 = DataType::f32;
    const auto sid = [](SdpaTensor t) { return static_cast<std::int64_t>(t); };

    const Descriptor& q = tensor(io, {B, H, S, D}, {S * l.q_stride, D, l.q_stride, 1}, sid(SdpaTensor::q));
    const Descriptor& kt = tensor(io, {B, KVH, D, S}, {S * l.k_stride, D, 1, l.k_stride}, sid(SdpaTensor::k));
    const Descriptor& v = tensor(io, {B, KVH, S, D}, {S * l.v_stride, D, l.v_stride, 1}, sid(SdpaTensor::v));
    const Descriptor& o = tensor(io, {B, H, S, D}, {S * l.o_stride, D, l.o_stride, 1}, sid(SdpaTensor::o));
    const Descriptor& stats = tensor(f32, {B, H, S, 1}, {H * S, S, 1, 1}, sid(SdpaTensor::stats));
    const Descriptor& scale = tensor(f32, {1, 1, 1, 1}, {1, 1, 1, 1}, sid(SdpaTensor::scale), true);
    const Descriptor& masked = tensor(f32, {1, 1, 1, 1}, {1, 1, 1, 1}, sid(SdpaTensor::masked_value), true);

    const std::vector<std::int64_t> square{B, H, S, S}, square_strides{H * S * S, S * S, S, 1};
    const std::vector<std::int64_t> row{B, H, S, 1}, row_strides{H * S, S, 1, 1};
    const auto scores = [&](DataType t = DataType::f32) -> const Descriptor& {
        return tensor(t, square, square_strides);
    };
    const auto per_row = [&]() -> const Descriptor& { return tensor(f32, row, row_strides); };

    const Descriptor& s = scores();
    matmul(q, kt, s);
    const Descriptor& scaled = scores();
    pointwise(PointwiseMode::mul, f32, s, &scale, scaled);
    const Descriptor &query_index = scores(), &key_index = scores();
    pointwise(PointwiseMode::gen_index, f32, scaled, nullptr, query_index, nullptr, 2);
    pointwise(PointwiseMode::gen_index, f32, scaled, nullptr, key_index, nullptr, 3);
    const Descriptor& keep = scores(DataType::boolean);
    pointwise(PointwiseMode::cmp_ge, DataType::boolean, query_index, &key_index, keep);
    const Descriptor& causal = scores();
    pointwise(PointwiseMode::binary_select, f32, scaled, &masked, causal, &keep);

    const Descriptor& m = per_row();
    reduction(ReductionOperator::max, causal, m);
    const Descriptor& shifted = scores();
    pointwise(PointwiseMode::sub, f32, causal, &m, shifted);
    const Descriptor& e = scores();
    pointwise(PointwiseMode::exp, f32, shifted, nullptr, e);
    const Descriptor& sum = per_row();
    reduction(ReductionOperator::add, e, sum);
    const Descriptor& log_sum = per_row();
    pointwise(PointwiseMode::log, f32, sum, nullptr, log_sum);
    pointwise(PointwiseMode::add, f32, m, &log_sum, stats);
    const Descriptor& p = scores(io);  // P in 16 bits: the second product's A type is the data's
    pointwise(PointwiseMode::div, f32, e, &sum, p);
    matmul(p, v, o);
}

std::vector<void*> SdpaForwardGraph::operations() const {
    std::vector<void*> out;
    out.reserve(operations_.size());
    for (const Descriptor& d : operations_) out.push_back(d.get());
    return out;
}

}  // namespace tune::kernels::cuda::cudnn
