#include "kernels/cuda/host/cudnn_graph_parts.h"

namespace tune::kernels::cuda::cudnn {

namespace {

constexpr std::int64_t kAlignment = 16;  // bytes: the 16-byte vector loads cuDNN's attention engines use

}  // namespace

const Descriptor& GraphParts::tensor(DataType type, const Shape& dims, const Shape& strides, std::int64_t uid,
                                     bool by_value, TensorReordering reordering, SourceLine where) {
    const bool is_virtual = uid == 0;
    Descriptor& d = tensors_.emplace_back(*api_, DescriptorType::tensor, where);
    d.set(Attribute::tensor_unique_id, is_virtual ? next_virtual_uid_++ : uid)
        .set(Attribute::tensor_data_type, type)
        .set(Attribute::tensor_dimensions, dims)
        .set(Attribute::tensor_strides, strides)
        .set(Attribute::tensor_byte_alignment, kAlignment)
        .set(Attribute::tensor_is_virtual, is_virtual);
    if (by_value) d.set(Attribute::tensor_is_by_value, true);
    if (reordering != TensorReordering::none) d.set(Attribute::tensor_reordering_mode, reordering);
    return d.finalize();
}

const Descriptor& GraphParts::pointwise(PointwiseMode mode, DataType compute, const Descriptor& x, const Descriptor* b,
                                        const Descriptor& y, const Descriptor* t, std::int64_t axis, SourceLine where) {
    Descriptor& how = settings_.emplace_back(*api_, DescriptorType::pointwise, where);
    how.set(Attribute::pointwise_mode, mode).set(Attribute::pointwise_math_precision, compute);
    if (axis >= 0) how.set(Attribute::pointwise_axis, axis);
    how.finalize();
    Descriptor& op = operations_.emplace_back(*api_, DescriptorType::operation_pointwise, where);
    op.set(Attribute::operation_pointwise_descriptor, how).set(Attribute::operation_pointwise_x, x);
    if (b != nullptr) op.set(Attribute::operation_pointwise_b, *b);
    if (t != nullptr) op.set(Attribute::operation_pointwise_t, *t);
    op.set(Attribute::operation_pointwise_y, y);
    return op.finalize();
}

void GraphParts::matmul(const Descriptor& a, const Descriptor& b, const Descriptor& c, SourceLine where) {
    Descriptor& how = settings_.emplace_back(*api_, DescriptorType::matmul, where);
    how.set(Attribute::matmul_compute_type, DataType::f32).finalize();
    operations_.emplace_back(*api_, DescriptorType::operation_matmul, where)
        .set(Attribute::operation_matmul_a, a)
        .set(Attribute::operation_matmul_b, b)
        .set(Attribute::operation_matmul_c, c)
        .set(Attribute::operation_matmul_descriptor, how)
        .finalize();
}

void GraphParts::reduction(ReductionOperator op, const Descriptor& x, const Descriptor& y, SourceLine where) {
    Descriptor& how = settings_.emplace_back(*api_, DescriptorType::reduction, where);
    how.set(Attribute::reduction_operator, op).set(Attribute::reduction_compute_type, DataType::f32).finalize();
    operations_.emplace_back(*api_, DescriptorType::operation_reduction, where)
        .set(Attribute::operation_reduction_x, x)
        .set(Attribute::operation_reduction_y, y)
        .set(Attribute::operation_reduction_descriptor, how)
        .finalize();
}

void GraphParts::reshape(const Descriptor& x, const Descriptor& y, SourceLine where) {
    operations_.emplace_back(*api_, DescriptorType::operation_reshape, where)
        .set(Attribute::operation_reshape_x, x)
        .set(Attribute::operation_reshape_y, y)
        .finalize();
}

std::vector<void*> GraphParts::operations() const {
    std::vector<void*> out;
    out.reserve(operations_.size());
    for (const Descriptor& d : operations_) out.push_back(d.get());
    return out;
}

}  // namespace tune::kernels::cuda::cudnn
