// The cuDNN attention graphs (kernels/cuda/host/sdpa_graph.h) and the code that
// makes a graph runnable (cudnn_plan.h): against the toolkit's real library,
// every tensor and operation of both graphs finalizes, which needs no device;
// on the stand-in (tests/cudnn_standin), both graphs compute what the CPU
// backend's flash attention does from the pointers bound to their ids, every
// refusal and fault takes its path, and an error names the call, the status
// and our line.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "kernels/compare.h"
#include "kernels/cuda/host/cudnn_attention.h"
#include "kernels/cuda/host/cudnn_plan.h"
#include "kernels/cuda/host/sdpa_graph.h"
#include "kernels/error.h"
#include "kernels/workspace_bytes.h"
#include "tests/support/sdpa_reference.h"

using namespace tune::kernels::cuda;
using namespace tune::kernels::cuda::cudnn;
using tune::kernels::compare_buffers;
using tune::kernels::DType;
using tune::kernels::within;

namespace {

// Eight query heads, q, k and v as column blocks of one fused row, as the trainer lays them out.
SdpaLayout llama_layout(DType dtype, std::int64_t kv_heads, std::int64_t seq) {
    return tune::testing::sdpa_layout(dtype, 8, kv_heads, seq);
}

// Sets an environment variable for one scope.
struct ScopedEnv {
    ScopedEnv(const char* name, const char* value) : name_(name) { ::setenv(name, value, 1); }
    ~ScopedEnv() { ::unsetenv(name_); }
    const char* name_;
};

CudnnLibrary standin() {
    const CudnnLoad load = load_cudnn({TUNE_CUDNN_STANDIN});
    INFO(load.why_not);
    REQUIRE(load.library);
    return *load.library;
}

constexpr std::size_t kForwardOperations = 14;
constexpr std::size_t kBackwardOperations = 23;
constexpr std::size_t kGroupedBackwardOperations = 25;  // dK and dV each summed over a group of query heads

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

TEST_CASE("against the cuDNN stand-in the forward graph is 14 finalized operations and the backward 23 or 25",
          "[cudnn]") {
    const CudnnLibrary lib = standin();
    const SdpaForwardGraph graph(lib.api, llama_layout(DType::bf16, 2, 1000));
    CHECK(graph.operations().size() == kForwardOperations);
    CHECK_THROWS_AS(SdpaForwardGraph(lib.api, llama_layout(DType::f32, 2, 1000)), tune::BackendError);
    const SdpaBackwardGraph backward(lib.api, llama_layout(DType::f16, 8, 1000));
    CHECK(backward.operations().size() == kBackwardOperations);
    const SdpaBackwardGraph grouped(lib.api, llama_layout(DType::bf16, 2, 1000));
    CHECK(grouped.operations().size() == kGroupedBackwardOperations);
    CHECK(sdpa_dq_accumulator_bytes(llama_layout(DType::f16, 8, 1000)) == 2 * 8 * 1000 * 64 * 4);
}

TEST_CASE("the backward graph takes grouped key/value heads and needs a whole output-gradient row", "[cudnn]") {
    CHECK(sdpa_backward_problem(llama_layout(DType::bf16, 8, 512)).empty());
    CHECK(sdpa_backward_problem(llama_layout(DType::bf16, 2, 512)).empty());
    CHECK(sdpa_backward_problem(llama_layout(DType::f16, 1, 100)).empty());
    SdpaLayout narrow = llama_layout(DType::bf16, 8, 512);
    narrow.dout_stride = 8 * 64 - 8;
    CHECK_THAT(sdpa_backward_problem(narrow), Catch::Contains("output gradient's row stride"));
    CHECK_THAT(sdpa_backward_problem(llama_layout(DType::f32, 8, 512)), Catch::Contains("not f32"));
    const CudnnLibrary lib = standin();
    CHECK_THROWS_WITH(SdpaBackwardGraph(lib.api, narrow), Catch::Contains("output gradient's row stride"));
}

TEST_CASE("a refused cuDNN call names the call, the attribute, cuDNN's status and our line", "[cudnn]") {
    const CudnnLibrary lib = standin();
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
    const CudnnLibrary lib = standin();
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
        CHECK(plan->workspace_bytes() ==
              static_cast<std::int64_t>(tune::kernels::workspace::cudnn_attention_plan_bytes(2, 8, 512, false)));
        // A tensor of the graph left unbound is refused at execution, naming the call.
        CHECK_THROWS_WITH(plan->execute(handle, {1, 2}, {handle, handle}, handle),
                          Catch::Contains("cudnnBackendExecute") && Catch::Contains("NULL_POINTER"));
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
TEST_CASE("the toolkit's cuDNN finalizes every tensor and operation of both graphs without a device", "[cudnn]") {
    const CudnnLoad load = load_cudnn();
    INFO(load.why_not);
    REQUIRE(load.library);
    for (const DType dtype : {DType::bf16, DType::f16})
        for (const std::int64_t kv_heads : {8, 2})
            for (const std::int64_t seq : {128, 1000}) {
                INFO("dtype " << tune::kernels::dtype_name(dtype) << ", kv heads " << kv_heads << ", seq " << seq);
                const SdpaForwardGraph graph(load.library->api, llama_layout(dtype, kv_heads, seq));
                CHECK(graph.operations().size() == kForwardOperations);
                const SdpaBackwardGraph backward(load.library->api, llama_layout(dtype, kv_heads, seq));
                CHECK(backward.operations().size() ==
                      (kv_heads == 8 ? kBackwardOperations : kGroupedBackwardOperations));
            }
}
#endif

TEST_CASE("on the cuDNN stand-in both graphs compute what the CPU backend's flash attention does", "[cudnn]") {
    using namespace tune::testing;
    const CudnnLibrary lib = standin();
    void* handle = nullptr;
    REQUIRE(lib.api.create(&handle) == 0);
    std::string why;
    // Grouped heads forward at 100 tokens in bf16.
    const SdpaLayout grouped = sdpa_layout(DType::bf16, 4, 2, 100);
    const SdpaBuffers want =
        sdpa_cpu_forward(grouped, random_16bit(grouped.batch * grouped.seq * grouped.q_stride, grouped.dtype, 3));
    SdpaBuffers got{want.qkv, std::vector<std::uint16_t>(want.out.size()), std::vector<float>(want.lse.size())};
    SdpaScalars scalars(grouped);
    const SdpaForwardGraph forward(lib.api, grouped);
    const auto forward_plan = OperationPlan::make(lib.api, handle, forward.operations(), why);
    REQUIRE(forward_plan);
    std::vector<std::uint8_t> workspace(static_cast<std::size_t>(forward_plan->workspace_bytes()));
    const SdpaBinding fb = sdpa_forward_binding(grouped, got.qkv.data(), got.out.data(), got.lse.data(), scalars);
    forward_plan->execute(handle, fb.uids, fb.pointers, workspace.data());
    const auto out = compare_buffers(want.out.data(), grouped.dtype, got.out.data(), grouped.dtype,
                                     static_cast<std::int64_t>(want.out.size()));
    const auto lse = compare_buffers(want.lse.data(), got.lse.data(), static_cast<std::int64_t>(want.lse.size()));
    INFO("out nmse " << out.nmse << " max " << out.max_abs << ", lse max " << lse.max_abs);
    CHECK(within(out, 1e-5, 0.02));
    CHECK(within(lse, 1e-10, 1e-4));

    // Backward: equal heads in f16, grouped heads (2 query heads per key/value head) in bf16.
    for (const SdpaLayout& l : {sdpa_layout(DType::f16, 4, 4, 70), sdpa_layout(DType::bf16, 4, 2, 70)}) {
        INFO("heads " << l.heads << ", key/value heads " << l.kv_heads);
        const SdpaBuffers fwd = sdpa_cpu_forward(l, random_16bit(l.batch * l.seq * l.q_stride, l.dtype, 5));
        const auto dout = random_16bit(l.batch * l.seq * l.dout_stride, l.dtype, 6);
        const auto want_grads = sdpa_cpu_backward(l, fwd, dout);
        std::vector<std::uint16_t> grads(fwd.qkv.size());
        std::vector<float> accumulator(static_cast<std::size_t>(sdpa_dq_accumulator_bytes(l) / 4), 0.0f);
        SdpaBuffers inputs = fwd;
        SdpaScalars backward_scalars(l);
        const SdpaBackwardGraph backward(lib.api, l);
        const auto backward_plan = OperationPlan::make(lib.api, handle, backward.operations(), why);
        REQUIRE(backward_plan);
        CHECK(backward_plan->workspace_bytes() ==
              static_cast<std::int64_t>(tune::kernels::workspace::cudnn_attention_plan_bytes(2, 4, 70, true)));
        workspace.assign(static_cast<std::size_t>(backward_plan->workspace_bytes()), 0);
        auto dout_copy = dout;
        const SdpaBinding bb =
            sdpa_backward_binding(l, inputs.qkv.data(), inputs.out.data(), inputs.lse.data(), dout_copy.data(),
                                  grads.data(), accumulator.data(), backward_scalars);
        backward_plan->execute(handle, bb.uids, bb.pointers, workspace.data());
        const auto g =
            compare_buffers(want_grads.data(), l.dtype, grads.data(), l.dtype, static_cast<std::int64_t>(grads.size()));
        INFO("dq, dk, dv nmse " << g.nmse << " max " << g.max_abs);
        CHECK(within(g, 1e-5, 0.05));

        // The dQ accumulator must arrive zeroed, as cuDNN's accumulates into it.
        accumulator[0] = 1.0f;
        CHECK_THROWS_WITH(backward_plan->execute(handle, bb.uids, bb.pointers, workspace.data()),
                          Catch::Contains("EXECUTION_FAILED"));
    }
    lib.api.destroy(handle);
}

TEST_CASE("cuDNN attention for a backend runs what the stand-in takes, falls back on the rest, and says which",
          "[cudnn]") {
    using namespace tune::testing;
    using tune::kernels::AttentionBackwardArgs;
    using tune::kernels::AttentionForwardArgs;
    using tune::kernels::Workspace;
    const CudnnLoad load = load_cudnn({TUNE_CUDNN_STANDIN});
    std::string why;
    const auto zero = [](void* p, std::uint64_t n) { std::memset(p, 0, n); };
    auto attention = CudnnAttention::open(load, nullptr, zero, why);
    REQUIRE(attention);

    const SdpaLayout l = sdpa_layout(DType::bf16, 4, 4, 40);
    const SdpaBuffers want = sdpa_cpu_forward(l, random_16bit(l.batch * l.seq * l.q_stride, l.dtype, 11));
    SdpaBuffers got{want.qkv, std::vector<std::uint16_t>(want.out.size()), std::vector<float>(want.lse.size())};
    std::vector<std::uint8_t> ws(tune::kernels::workspace::cuda_flash_attention_bytes(2, 4, 40, 64, 2));
    const AttentionForwardArgs f = sdpa_forward_args(l, got.qkv.data(), got.out.data(), got.lse.data());
    REQUIRE(attention->forward(f, Workspace{ws.data(), ws.size()}));
    CHECK(within(
        compare_buffers(want.out.data(), l.dtype, got.out.data(), l.dtype, static_cast<std::int64_t>(want.out.size())),
        1e-5, 0.02));

    const auto dout = random_16bit(l.batch * l.seq * l.dout_stride, l.dtype, 12);
    std::vector<std::uint16_t> grads(want.qkv.size());
    const AttentionBackwardArgs b = sdpa_backward_args(l, want, dout.data(), grads.data());
    std::fill(ws.begin(), ws.end(), 0xff);  // the accumulator is zeroed by the call, whatever was there
    REQUIRE(attention->backward(b, Workspace{ws.data(), ws.size()}));
    const auto want_grads = sdpa_cpu_backward(l, want, dout);
    CHECK(within(
        compare_buffers(want_grads.data(), l.dtype, grads.data(), l.dtype, static_cast<std::int64_t>(grads.size())),
        1e-5, 0.05));
    CHECK_THAT(attention->path(), Catch::Equals("cuDNN 9.19.0: 1 forward and 1 backward calls"));

    // Each refusal leaves the call to tune's kernels, and the path names the last reason.
    AttentionBackwardArgs aliased = b;
    aliased.dq = const_cast<void*>(aliased.dout);
    CHECK_FALSE(attention->backward(aliased, Workspace{ws.data(), ws.size()}));
    CHECK_THAT(attention->path(), Catch::Contains("tune's kernels for 1") && Catch::Contains("dQ shares dO"));
    CHECK_FALSE(attention->forward(f, Workspace{ws.data(), 16}));
    CHECK_THAT(attention->path(), Catch::Contains("workspace below"));
    AttentionForwardArgs wide = f;
    wide.dtype = DType::f32;
    CHECK_FALSE(attention->forward(wide, Workspace{ws.data(), ws.size()}));
    CHECK_THAT(attention->path(), Catch::Contains("tune's kernels for 3") && Catch::Contains("not f32"));
    AttentionBackwardArgs narrow = b;
    narrow.dout_stride = 4 * 64 - 8;
    CHECK_FALSE(attention->backward(narrow, Workspace{ws.data(), ws.size()}));
    CHECK_THAT(attention->path(), Catch::Contains("output gradient's row stride"));

    // Grouped heads (2 query heads per key/value head) run on cuDNN both ways.
    const SdpaLayout gl = sdpa_layout(DType::bf16, 4, 2, 40);
    const SdpaBuffers gwant = sdpa_cpu_forward(gl, random_16bit(gl.batch * gl.seq * gl.q_stride, gl.dtype, 13));
    const auto gdout = random_16bit(gl.batch * gl.seq * gl.dout_stride, gl.dtype, 14);
    std::vector<std::uint16_t> ggrads(gwant.qkv.size());
    REQUIRE(attention->backward(sdpa_backward_args(gl, gwant, gdout.data(), ggrads.data()),
                                Workspace{ws.data(), ws.size()}));
    const auto gwant_grads = sdpa_cpu_backward(gl, gwant, gdout);
    CHECK(within(compare_buffers(gwant_grads.data(), gl.dtype, ggrads.data(), gl.dtype,
                                 static_cast<std::int64_t>(ggrads.size())),
                 1e-5, 0.05));
    CHECK_THAT(attention->path(), Catch::Contains("2 backward calls"));

    ::setenv("TUNE_CUDNN_LIBRARY", "off", 1);
    CHECK_FALSE(CudnnAttention::open(load_cudnn(), nullptr, zero, why));
    ::unsetenv("TUNE_CUDNN_LIBRARY");
    CHECK(why == "turned off by TUNE_CUDNN_LIBRARY=off");
}
