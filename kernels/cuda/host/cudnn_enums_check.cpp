// cudnn_enums.h against the toolkit's cudnn_graph.h: a value copied wrong
// fails the build here instead of a graph on a GPU. Compiled only where the
// header is found (kernels/CMakeLists.txt).
#include <cudnn_graph.h>

#include "kernels/cuda/host/cudnn_enums.h"

namespace tune::kernels::cuda::cudnn {
namespace {

template <class Ours, class Theirs>
constexpr bool same(Ours ours, Theirs theirs) {
    return static_cast<long long>(ours) == static_cast<long long>(theirs);
}

static_assert(kStatusSuccess == CUDNN_STATUS_SUCCESS);
static_assert(kStatusNotSupported == CUDNN_STATUS_NOT_SUPPORTED);
static_assert(kStatusDeviceAllocationFailed == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED);
static_assert(not_supported(CUDNN_STATUS_NOT_SUPPORTED_SHAPE) && !not_supported(CUDNN_STATUS_INTERNAL_ERROR));

static_assert(same(DescriptorType::pointwise, CUDNN_BACKEND_POINTWISE_DESCRIPTOR));
static_assert(same(DescriptorType::engine_config, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR));
static_assert(same(DescriptorType::engine_heuristics, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR));
static_assert(same(DescriptorType::execution_plan, CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR));
static_assert(same(DescriptorType::operation_pointwise, CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR));
static_assert(same(DescriptorType::operation_graph, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR));
static_assert(same(DescriptorType::variant_pack, CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR));
static_assert(same(DescriptorType::tensor, CUDNN_BACKEND_TENSOR_DESCRIPTOR));
static_assert(same(DescriptorType::matmul, CUDNN_BACKEND_MATMUL_DESCRIPTOR));
static_assert(same(DescriptorType::operation_matmul, CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR));
static_assert(same(DescriptorType::reduction, CUDNN_BACKEND_REDUCTION_DESCRIPTOR));
static_assert(same(DescriptorType::operation_reduction, CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR));
static_assert(same(DescriptorType::operation_reshape, CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR));

static_assert(same(AttributeType::handle, CUDNN_TYPE_HANDLE));
static_assert(same(AttributeType::data_type, CUDNN_TYPE_DATA_TYPE));
static_assert(same(AttributeType::boolean, CUDNN_TYPE_BOOLEAN));
static_assert(same(AttributeType::int64, CUDNN_TYPE_INT64));
static_assert(same(AttributeType::float32, CUDNN_TYPE_FLOAT));
static_assert(same(AttributeType::float64, CUDNN_TYPE_DOUBLE));
static_assert(same(AttributeType::void_ptr, CUDNN_TYPE_VOID_PTR));
static_assert(same(AttributeType::heuristic_mode, CUDNN_TYPE_HEUR_MODE));
static_assert(same(AttributeType::pointwise_mode, CUDNN_TYPE_POINTWISE_MODE));
static_assert(same(AttributeType::backend_descriptor, CUDNN_TYPE_BACKEND_DESCRIPTOR));
static_assert(same(AttributeType::reduction_operator, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE));
static_assert(same(AttributeType::tensor_reordering_mode, CUDNN_TYPE_TENSOR_REORDERING_MODE));

static_assert(same(Attribute::pointwise_mode, CUDNN_ATTR_POINTWISE_MODE));
static_assert(same(Attribute::pointwise_math_precision, CUDNN_ATTR_POINTWISE_MATH_PREC));
static_assert(same(Attribute::pointwise_axis, CUDNN_ATTR_POINTWISE_AXIS));
static_assert(same(Attribute::heuristics_mode, CUDNN_ATTR_ENGINEHEUR_MODE));
static_assert(same(Attribute::heuristics_operation_graph, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH));
static_assert(same(Attribute::heuristics_results, CUDNN_ATTR_ENGINEHEUR_RESULTS));
static_assert(same(Attribute::engine_config_workspace_size, CUDNN_ATTR_ENGINECFG_WORKSPACE_SIZE));
static_assert(same(Attribute::plan_handle, CUDNN_ATTR_EXECUTION_PLAN_HANDLE));
static_assert(same(Attribute::plan_engine_config, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG));
static_assert(same(Attribute::plan_workspace_size, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE));
static_assert(same(Attribute::operation_pointwise_descriptor, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR));
static_assert(same(Attribute::operation_pointwise_x, CUDNN_ATTR_OPERATION_POINTWISE_XDESC));
static_assert(same(Attribute::operation_pointwise_b, CUDNN_ATTR_OPERATION_POINTWISE_BDESC));
static_assert(same(Attribute::operation_pointwise_y, CUDNN_ATTR_OPERATION_POINTWISE_YDESC));
static_assert(same(Attribute::operation_pointwise_t, CUDNN_ATTR_OPERATION_POINTWISE_TDESC));
static_assert(same(Attribute::operation_graph_handle, CUDNN_ATTR_OPERATIONGRAPH_HANDLE));
static_assert(same(Attribute::operation_graph_ops, CUDNN_ATTR_OPERATIONGRAPH_OPS));
static_assert(same(Attribute::tensor_byte_alignment, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT));
static_assert(same(Attribute::tensor_data_type, CUDNN_ATTR_TENSOR_DATA_TYPE));
static_assert(same(Attribute::tensor_dimensions, CUDNN_ATTR_TENSOR_DIMENSIONS));
static_assert(same(Attribute::tensor_strides, CUDNN_ATTR_TENSOR_STRIDES));
static_assert(same(Attribute::tensor_unique_id, CUDNN_ATTR_TENSOR_UNIQUE_ID));
static_assert(same(Attribute::tensor_is_virtual, CUDNN_ATTR_TENSOR_IS_VIRTUAL));
static_assert(same(Attribute::tensor_is_by_value, CUDNN_ATTR_TENSOR_IS_BY_VALUE));
static_assert(same(Attribute::tensor_reordering_mode, CUDNN_ATTR_TENSOR_REORDERING_MODE));
static_assert(same(Attribute::variant_pack_unique_ids, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS));
static_assert(same(Attribute::variant_pack_data_pointers, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS));
static_assert(same(Attribute::variant_pack_workspace, CUDNN_ATTR_VARIANT_PACK_WORKSPACE));
static_assert(same(Attribute::matmul_compute_type, CUDNN_ATTR_MATMUL_COMP_TYPE));
static_assert(same(Attribute::operation_matmul_a, CUDNN_ATTR_OPERATION_MATMUL_ADESC));
static_assert(same(Attribute::operation_matmul_b, CUDNN_ATTR_OPERATION_MATMUL_BDESC));
static_assert(same(Attribute::operation_matmul_c, CUDNN_ATTR_OPERATION_MATMUL_CDESC));
static_assert(same(Attribute::operation_matmul_descriptor, CUDNN_ATTR_OPERATION_MATMUL_DESC));
static_assert(same(Attribute::reduction_operator, CUDNN_ATTR_REDUCTION_OPERATOR));
static_assert(same(Attribute::reduction_compute_type, CUDNN_ATTR_REDUCTION_COMP_TYPE));
static_assert(same(Attribute::operation_reduction_x, CUDNN_ATTR_OPERATION_REDUCTION_XDESC));
static_assert(same(Attribute::operation_reduction_y, CUDNN_ATTR_OPERATION_REDUCTION_YDESC));
static_assert(same(Attribute::operation_reduction_descriptor, CUDNN_ATTR_OPERATION_REDUCTION_DESC));
static_assert(same(Attribute::operation_reshape_x, CUDNN_ATTR_OPERATION_RESHAPE_XDESC));
static_assert(same(Attribute::operation_reshape_y, CUDNN_ATTR_OPERATION_RESHAPE_YDESC));

static_assert(same(DataType::f32, CUDNN_DATA_FLOAT));
static_assert(same(DataType::f16, CUDNN_DATA_HALF));
static_assert(same(DataType::i32, CUDNN_DATA_INT32));
static_assert(same(DataType::bf16, CUDNN_DATA_BFLOAT16));
static_assert(same(DataType::boolean, CUDNN_DATA_BOOLEAN));

static_assert(same(PointwiseMode::add, CUDNN_POINTWISE_ADD));
static_assert(same(PointwiseMode::mul, CUDNN_POINTWISE_MUL));
static_assert(same(PointwiseMode::div, CUDNN_POINTWISE_DIV));
static_assert(same(PointwiseMode::sub, CUDNN_POINTWISE_SUB));
static_assert(same(PointwiseMode::exp, CUDNN_POINTWISE_EXP));
static_assert(same(PointwiseMode::log, CUDNN_POINTWISE_LOG));
static_assert(same(PointwiseMode::identity, CUDNN_POINTWISE_IDENTITY));
static_assert(same(PointwiseMode::cmp_ge, CUDNN_POINTWISE_CMP_GE));
static_assert(same(PointwiseMode::gen_index, CUDNN_POINTWISE_GEN_INDEX));
static_assert(same(PointwiseMode::binary_select, CUDNN_POINTWISE_BINARY_SELECT));

static_assert(same(TensorReordering::none, CUDNN_TENSOR_REORDERING_NONE));
static_assert(same(TensorReordering::f16x16, CUDNN_TENSOR_REORDERING_F16x16));

static_assert(same(ReductionOperator::add, CUDNN_REDUCE_TENSOR_ADD));
static_assert(same(ReductionOperator::max, CUDNN_REDUCE_TENSOR_MAX));

static_assert(same(HeuristicMode::instant, CUDNN_HEUR_MODE_INSTANT));
static_assert(same(HeuristicMode::fallback, CUDNN_HEUR_MODE_FALLBACK));
static_assert(same(HeuristicMode::a, CUDNN_HEUR_MODE_A));

}  // namespace
}  // namespace tune::kernels::cuda::cudnn
