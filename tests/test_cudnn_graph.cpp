// The cuDNN attention graph (kernels/cuda/host/sdpa_graph.h) and the code that
// makes a graph runnable (cudnn_plan.h): against the toolkit's real library,
// every tensor and operation of the forward graph finalizes, which needs no
// device; against a stand-in (tests/support/fake_cudnn.c), every refusal and
// fault takes its path, and an error names the call, the status and our line.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>

#include "kernels/cuda/host/cudnn_plan.h"
#include "kernels/cuda/host/sdpa_graph.h"
#include "kernels/error.h"

using namespace tune::kernels::cuda;
using namespace tune::kernels::cuda::cudnn;
using tune::kernels::DType;

namespace {

SdpaLayout llama_layout(DType dtype, std::int64_t kv_heads, std::int64_t seq) {
    SdpaLayout l;
    l.batch = 2, l.heads = 8, l.kv_heads = kv_heads, l.seq = seq, l.head_dim = 64, l.dtype = dtype;
    // q, k and v as column blocks of one fused QKV row, as the trainer lays them out.
    l.q_stride = l.k_stride = l.v_stride = (l.heads + 2 * kv_heads) * l.head_dim;
    l.o_stride = l.dout_stride = l.heads * l.head_dim;
    return l;
}

// Sets an environment variable for one scope.
struct ScopedEnv {
    ScopedEnv(const char* name, const char* value) : name_(name) { ::setenv(name, value, 1); }
    ~ScopedEnv() { ::unsetenv(name_); }
    const char* name_;
};

CudnnLibrary fake_library() {
    const CudnnLoad load = load_cudnn({TUNE_FAKE_CUDNN});
    INFO(load.why_not);
    REQUIRE(load.library);
    return *load.library;
}

constexpr std::size_t kForwardOperations = 14;
constexpr std::size_t kBackwardOperations = 23;

}  // namespace

TEST_CASE("the attention graph takes bf16 and f16 data with whole 16-byte rows and grouped heads only", "[cudnn]") {
    CHECK(sdpa_layout_problem(llama_layout(DType::bf16, 8, 2048)).empty());
    CHECK(sdpa_layout_problem(llama_layout(DType::f16, 2, 1000)).empty());
    CHECK_THAT(sdpa_layout_problem(llama_layout(DType::f32, 8, 128)), Catch::Contains("not f32"));
    CHECK_THAT(sdpa_layout_problem(llama_layout(DType::bf16, 3, 128)), Catch::Contains("not a multiple of 3"));
    SdpaLayout odd = llama_layout(DType::bf16, 8, 128);
    odd.head_dim = 60;
    CHECK_THAT(sdpa_layout_problem(odd), Catch::Contains("head size 60"));
    SdpaLayout narrow = llama_layout(DType::bf16, 8, 128);
    narrow.o_stride = 8 * 64 - 8;
    CHECK_THAT(sdpa_layout_problem(narrow), Catch::Contains("row stride"));
    narrow.o_stride = 8 * 64 + 4;  // wide enough, but its rows are not 16-byte aligned
    CHECK_THAT(sdpa_layout_problem(narrow), Catch::Contains("multiple of 8"));
}

TEST_CASE("against the cuDNN stand-in the forward graph is 14 finalized operations and the backward 23", "[cudnn]") {
    const CudnnLibrary lib = fake_library();
    const SdpaForwardGraph graph(lib.api, llama_layout(DType::bf16, 2, 1000));
    CHECK(graph.operations().size() == kForwardOperations);
    CHECK_THROWS_AS(SdpaForwardGraph(lib.api, llama_layout(DType::f32, 2, 1000)), tune::BackendError);
    const SdpaBackwardGraph backward(lib.api, llama_layout(DType::f16, 8, 1000));
    CHECK(backward.operations().size() == kBackwardOperations);
    CHECK(sdpa_dq_accumulator_bytes(llama_layout(DType::f16, 8, 1000)) == 2 * 8 * 1000 * 64 * 4);
}

TEST_CASE("the backward graph takes equal query and key/value heads only, and a whole output-gradient row", "[cudnn]") {
    CHECK(sdpa_backward_problem(llama_layout(DType::bf16, 8, 512)).empty());
    CHECK_THAT(sdpa_backward_problem(llama_layout(DType::bf16, 2, 512)),
               Catch::Contains("no sum of dK and dV over a group") && Catch::Contains("8 heads, 2 key/value heads"));
    SdpaLayout narrow = llama_layout(DType::bf16, 8, 512);
    narrow.dout_stride = 8 * 64 - 8;
    CHECK_THAT(sdpa_backward_problem(narrow), Catch::Contains("output gradient's row stride"));
    CHECK_THAT(sdpa_backward_problem(llama_layout(DType::f32, 8, 512)), Catch::Contains("not f32"));
    const CudnnLibrary lib = fake_library();
    CHECK_THROWS_WITH(SdpaBackwardGraph(lib.api, llama_layout(DType::bf16, 2, 512)),
                      Catch::Contains("no sum of dK and dV"));
}

TEST_CASE("a refused cuDNN call names the call, the attribute, cuDNN's status and our line", "[cudnn]") {
    const CudnnLibrary lib = fake_library();
    const ScopedEnv fail("FAKE_CUDNN_SET_FAIL", "902:2000");  // CUDNN_ATTR_TENSOR_DIMENSIONS
    try {
        SdpaForwardGraph graph(lib.api, llama_layout(DType::bf16, 8, 256));
        FAIL("the stand-in refused the dimensions, and nothing said so");
    } catch (const CallError& e) {
        CHECK(e.failure().library == Library::cudnn);
        CHECK(e.failure().code == 2000);
        CHECK_THAT(std::string(e.what()),
                   Catch::StartsWith("cudnn: cudnnBackendSetAttribute failed with CUDNN_STATUS_BAD_PARAM (2000)") &&
                       Catch::Contains("attribute 902") && Catch::Contains("kernels/cuda/host/sdpa_graph.cpp:"));
    }
}

TEST_CASE("a graph no engine takes is an answer with the reason, and a fault is an error", "[cudnn]") {
    const CudnnLibrary lib = fake_library();
    const SdpaForwardGraph graph(lib.api, llama_layout(DType::f16, 8, 512));
    const std::vector<void*> ops = graph.operations();
    void* handle = nullptr;
    REQUIRE(lib.api.create(&handle) == 0);
    std::string why;

    SECTION("the first configuration that finalizes is the plan, with its workspace") {
        const ScopedEnv engines("FAKE_CUDNN_ENGINES", "3");
        const auto plan = OperationPlan::make(lib.api, handle, ops, why);
        REQUIRE(plan);
        CHECK(why.empty());
        CHECK(plan->workspace_bytes() == 4096);
        const std::vector<std::int64_t> uids{1, 2};
        const std::vector<void*> pointers{handle, handle};
        plan->execute(handle, uids, pointers, nullptr);
    }
    SECTION("a graph pattern cuDNN does not take") {
        const ScopedEnv fail("FAKE_CUDNN_FINALIZE_FAIL", "15:3001");  // the operation graph
        CHECK_FALSE(OperationPlan::make(lib.api, handle, ops, why));
        CHECK_THAT(why, Catch::Contains("no graph of this pattern") &&
                            Catch::Contains("CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN"));
    }
    SECTION("heuristics with nothing to offer") {
        const ScopedEnv engines("FAKE_CUDNN_ENGINES", "0");
        CHECK_FALSE(OperationPlan::make(lib.api, handle, ops, why));
        CHECK_THAT(why, Catch::Contains("offer no engine"));
    }
    SECTION("every offered engine refuses the shape") {
        const ScopedEnv engines("FAKE_CUDNN_ENGINES", "2");
        const ScopedEnv fail("FAKE_CUDNN_FINALIZE_FAIL", "5:3002");  // every execution plan
        CHECK_FALSE(OperationPlan::make(lib.api, handle, ops, why));
        CHECK_THAT(why, Catch::Contains("none of the 2") ||
                            (Catch::Contains("of the 2 offered") && Catch::Contains("NOT_SUPPORTED_SHAPE")));
    }
    SECTION("a fault that is not a refusal throws") {
        const ScopedEnv fail("FAKE_CUDNN_FINALIZE_FAIL", "5:2000");
        CHECK_THROWS_AS(OperationPlan::make(lib.api, handle, ops, why), CallError);
    }
    lib.api.destroy(handle);
}

#ifdef TUNE_HAVE_CUDA
TEST_CASE("the toolkit's cuDNN finalizes every tensor and operation of the forward graph without a device", "[cudnn]") {
    const CudnnLoad load = load_cudnn();
    INFO(load.why_not);
    REQUIRE(load.library);
    for (const DType dtype : {DType::bf16, DType::f16})
        for (const std::int64_t kv_heads : {8, 2})
            for (const std::int64_t seq : {128, 1000}) {
                INFO("dtype " << tune::kernels::dtype_name(dtype) << ", kv heads " << kv_heads << ", seq " << seq);
                const SdpaForwardGraph graph(load.library->api, llama_layout(dtype, kv_heads, seq));
                CHECK(graph.operations().size() == kForwardOperations);
            }
}
#endif
