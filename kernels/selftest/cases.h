// The standard self-test cases, one function per group of ops.
//
// Adding an op (each step fails a build or a test until it is done):
//  1. kernels/backend.h: the pure virtual with its shapes in comments, and its
//     line in TUNE_BACKEND_OPS (a static_assert holds the two together; both
//     backends declare their overrides from the list, so neither compiles
//     without an implementation). Scratch: a *_workspace_bytes query in
//     TUNE_BACKEND_WORKSPACE_QUERIES, its formula in kernels/workspace_bytes.h
//     when the estimator sizes it too.
//  2. Element-wise rules once, in kernels/math/NAME.h (TUNE_HD), with a test
//     against a plain reference in tests/test_math_NAME.cpp.
//  3. Argument rules once, in kernels/op_checks, called first by both backends.
//  4. The CPU version in kernels/cpu/ (the reference), with a
//     finite-difference test when the op has a gradient (tests/test_cpu_*).
//  5. The CUDA version in kernels/cuda/NAME.cu: a kernel launched with
//     TUNE_LAUNCH (so the emulated device runs it in CI), calling the math rule.
//  6. A case here, in the group's cases_GROUP.cpp, whose `op` (or `checks`,
//     for a case that drives several ops) names it: tests/test_selftest.cpp
//     fails on an op of kBackendOps no case checks (kernels/selftest/op_coverage).
//     Its outputs' OpClass picks the tolerance (tolerance.cpp).
//  7. If the trainer keeps the op's output, the memory model
//     (docs/memory-model.md) and the estimator change with it; if its time
//     matters, a probe (probe/).
#pragma once

#include <string>
#include <vector>

#include "kernels/selftest/selftest.h"

namespace tune::kernels::selftest {

void add_gemm_cases(std::vector<Case>& out);
void add_attention_cases(std::vector<Case>& out);
void add_layer_cases(std::vector<Case>& out);        // embedding, rmsnorm, rope, swiglu, cross-entropy
void add_elementwise_cases(std::vector<Case>& out);  // add, scale, cast, unscale, sum_squares, neftune
void add_optimizer_cases(std::vector<Case>& out);
void add_nf4_cases(std::vector<Case>& out);        // QLoRA's NF4 quantize and dequantize
void add_graph_cases(std::vector<Case>& out);      // ops recorded into a graph (OpGraph) and replayed
void add_side_work_cases(std::vector<Case>& out);  // copies and adds beside the compute stream (Backend::beside)

inline const DType kFloatTypes[] = {DType::f32, DType::bf16, DType::f16};

inline std::string name_of(DType t) { return std::string(dtype_name(t)); }

}  // namespace tune::kernels::selftest
