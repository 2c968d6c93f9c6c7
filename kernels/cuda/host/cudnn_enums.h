// The numbers of cuDNN's backend (graph) API that tune's fused attention uses,
// named here so the attention code needs no cuDNN header: the library is
// loaded at run time (cudnn_library.h). Each value is the one cudnn_graph.h
// gives the same name; cudnn_enums_check.cpp holds them to the toolkit's header
// at build time wherever the header is present.
#pragma once

namespace tune::kernels::cuda::cudnn {

inline constexpr int kStatusSuccess = 0;
inline constexpr int kStatusNotSupported = 3000;  // the first of the NOT_SUPPORTED family (3000-3999)
inline constexpr int kStatusDeviceAllocationFailed = 4004;

// Whether a status says the graph has no engine here (a fall back, not a fault).
inline constexpr bool not_supported(int status) { return status >= 3000 && status < 4000; }

// cudnnBackendDescriptorType_t
enum class DescriptorType : int {
    pointwise = 0,
    engine_config = 3,
    engine_heuristics = 4,
    execution_plan = 5,
    operation_pointwise = 13,
    operation_graph = 15,
    variant_pack = 16,
    tensor = 17,
    matmul = 18,
    operation_matmul = 19,
    reduction = 21,
    operation_reduction = 22,
    operation_reshape = 31,
};

// cudnnBackendAttributeType_t: the C type of an attribute's elements.
enum class AttributeType : int {
    handle = 0,
    data_type = 1,
    boolean = 2,
    int64 = 3,
    float32 = 4,
    float64 = 5,
    void_ptr = 6,
    heuristic_mode = 8,
    pointwise_mode = 14,
    backend_descriptor = 15,
    reduction_operator = 18,
    tensor_reordering_mode = 20,
};

// cudnnBackendAttributeName_t
enum class Attribute : int {
    pointwise_mode = 0,
    pointwise_math_precision = 1,
    pointwise_axis = 9,
    heuristics_mode = 200,
    heuristics_operation_graph = 201,
    heuristics_results = 202,
    engine_config_workspace_size = 303,
    plan_handle = 400,
    plan_engine_config = 401,
    plan_workspace_size = 402,
    operation_pointwise_descriptor = 750,
    operation_pointwise_x = 751,
    operation_pointwise_b = 752,
    operation_pointwise_y = 753,
    operation_pointwise_t = 758,
    operation_graph_handle = 800,
    operation_graph_ops = 801,
    tensor_byte_alignment = 900,
    tensor_data_type = 901,
    tensor_dimensions = 902,
    tensor_strides = 903,
    tensor_unique_id = 906,
    tensor_is_virtual = 907,
    tensor_is_by_value = 908,
    tensor_reordering_mode = 909,
    variant_pack_unique_ids = 1000,
    variant_pack_data_pointers = 1001,
    variant_pack_workspace = 1003,
    matmul_compute_type = 1500,
    operation_matmul_a = 1520,
    operation_matmul_b = 1521,
    operation_matmul_c = 1522,
    operation_matmul_descriptor = 1523,
    reduction_operator = 1600,
    reduction_compute_type = 1601,
    operation_reduction_x = 1610,
    operation_reduction_y = 1611,
    operation_reduction_descriptor = 1612,
    operation_reshape_x = 2200,
    operation_reshape_y = 2201,
};

// cudnnDataType_t
enum class DataType : int { f32 = 0, f16 = 2, i32 = 4, bf16 = 9, boolean = 11 };

// cudnnPointwiseMode_t
enum class PointwiseMode : int {
    add = 0,
    mul = 1,
    div = 6,
    sub = 9,
    exp = 13,
    log = 15,
    identity = 21,
    cmp_ge = 303,
    gen_index = 501,
    binary_select = 601,
};

// cudnnBackendTensorReordering_t
enum class TensorReordering : int { none = 0, f16x16 = 2 };

// cudnnReduceTensorOp_t
enum class ReductionOperator : int { add = 0, max = 3 };

// cudnnBackendHeurMode_t
enum class HeuristicMode : int { instant = 0, fallback = 2, a = 3 };

}  // namespace tune::kernels::cuda::cudnn
