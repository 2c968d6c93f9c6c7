// cuDNN's fused attention graphs (kernels/cuda/host/sdpa_graph.h) on a real
// device: a plan is found for each, and the forward's output and log-sum-exp,
// and the backward's dQ, dK and dV, agree with the CPU backend's flash
// attention on the same 16-bit inputs, with grouped heads (forward) and a
// length that is not a multiple of 128. Prints each plan's workspace beside
// the bound the estimate counts.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "kernels/compare.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/host/cudnn_plan.h"
#include "kernels/workspace_bytes.h"
#include "tests/support/sdpa_reference.h"

using namespace tune::kernels;
using namespace tune::kernels::cuda;
using namespace tune::testing;

namespace {

// A device buffer holding `host`'s bytes, freed with it.
struct DeviceCopy {
    Backend& device;
    std::uint64_t bytes;
    void* at;
    template <class T>
    DeviceCopy(Backend& d, const std::vector<T>& host)
        : device(d), bytes(host.size() * sizeof(T)), at(d.allocate(bytes)) {
        device.copy_to_device(at, host.data(), bytes);
    }
    ~DeviceCopy() { device.deallocate(at, bytes); }
};

// cuDNN's handle on the backend's stream, and a plan for `operations`.
struct DevicePlan {
    const CudnnApi& api;
    void* handle = nullptr;
    std::unique_ptr<cudnn::OperationPlan> plan;
    DevicePlan(const CudnnApi& a, Backend& device, const std::vector<void*>& operations, const char* what,
               const cudnn::SdpaLayout& l)
        : api(a) {
        cudnn::check(api, api.create(&handle), "cudnnCreate", "device 0");
        cudnn::check(api, api.set_stream(handle, cuda_stream(device)), "cudnnSetStream", "the backend's stream");
        std::string why;
        plan = cudnn::OperationPlan::make(api, handle, operations, why);
        INFO(why);
        REQUIRE(plan);
        const bool backward = std::string(what) == "backward";
        std::printf("cuDNN attention %s %s b%lld h%lld kv%lld s%lld d%lld: workspace %lld bytes (bound %lld)\n", what,
                    std::string(dtype_name(l.dtype)).c_str(), static_cast<long long>(l.batch),
                    static_cast<long long>(l.heads), static_cast<long long>(l.kv_heads), static_cast<long long>(l.seq),
                    static_cast<long long>(l.head_dim), static_cast<long long>(plan->workspace_bytes()),
                    static_cast<long long>(
                        tune::kernels::workspace::cudnn_attention_plan_bytes(l.batch, l.heads, l.seq, backward)));
    }
    ~DevicePlan() { api.destroy(handle); }
};

SdpaBuffers cudnn_forward(const cudnn::SdpaLayout& l, const std::vector<std::uint16_t>& qkv, const CudnnApi& api) {
    auto device = make_cuda_backend(0);
    const cudnn::SdpaForwardGraph graph(api, l);
    const DevicePlan p(api, *device, graph.operations(), "forward", l);
    SdpaBuffers b{qkv, std::vector<std::uint16_t>(l.batch * l.seq * l.o_stride),
                  std::vector<float>(l.batch * l.heads * l.seq)};
    const DeviceCopy d_qkv(*device, b.qkv), d_out(*device, b.out), d_lse(*device, b.lse);
    const DeviceCopy workspace(*device,
                               std::vector<std::uint8_t>(std::max<std::int64_t>(p.plan->workspace_bytes(), 16)));
    SdpaScalars scalars(l);
    const SdpaBinding bound = sdpa_forward_binding(l, d_qkv.at, d_out.at, d_lse.at, scalars);
    p.plan->execute(p.handle, bound.uids, bound.pointers, workspace.at);
    device->copy_to_host(b.out.data(), d_out.at, d_out.bytes);
    device->copy_to_host(b.lse.data(), d_lse.at, d_lse.bytes);
    device->synchronize();
    return b;
}

std::vector<std::uint16_t> cudnn_backward(const cudnn::SdpaLayout& l, const SdpaBuffers& fwd,
                                          const std::vector<std::uint16_t>& dout, const CudnnApi& api) {
    auto device = make_cuda_backend(0);
    const cudnn::SdpaBackwardGraph graph(api, l);
    const DevicePlan p(api, *device, graph.operations(), "backward", l);
    std::vector<std::uint16_t> grads(fwd.qkv.size());
    const DeviceCopy qkv(*device, fwd.qkv), out(*device, fwd.out), lse(*device, fwd.lse), d_out(*device, dout);
    const DeviceCopy d_grads(*device, grads);
    const DeviceCopy accumulator(*device, std::vector<float>(cudnn::sdpa_dq_accumulator_bytes(l) / 4, 0.0f));
    const DeviceCopy workspace(*device,
                               std::vector<std::uint8_t>(std::max<std::int64_t>(p.plan->workspace_bytes(), 16)));
    SdpaScalars scalars(l);
    const SdpaBinding bound =
        sdpa_backward_binding(l, qkv.at, out.at, lse.at, d_out.at, d_grads.at, accumulator.at, scalars);
    p.plan->execute(p.handle, bound.uids, bound.pointers, workspace.at);
    device->copy_to_host(grads.data(), d_grads.at, d_grads.bytes);
    device->synchronize();
    return grads;
}

}  // namespace

TEST_CASE("cuDNN's fused attention graph runs here and agrees with the CPU backend's flash attention") {
#ifdef TUNE_CUDA_EMU
    WARN("the emulated device's cuDNN is the stand-in, which tests/test_cudnn_graph.cpp runs on host memory");
    return;
#endif
    const CudnnLoad load = load_cudnn();
    if (!load.library) {
        WARN("cuDNN is not usable, so tune's own attention kernels run: " << load.why_not);
        return;
    }
    for (const auto& l : {sdpa_layout(DType::bf16, 8, 8, 1000), sdpa_layout(DType::f16, 8, 2, 256),
                          sdpa_layout(DType::f16, 8, 8, 256)}) {
        INFO(dtype_name(l.dtype) << ", kv heads " << l.kv_heads << ", seq " << l.seq);
        const SdpaBuffers want = sdpa_cpu_forward(l, random_16bit(l.batch * l.seq * l.q_stride, l.dtype, 7));
        const SdpaBuffers got = cudnn_forward(l, want.qkv, load.library->api);
        const ErrorStats out = compare_buffers(want.out.data(), l.dtype, got.out.data(), l.dtype,
                                               static_cast<std::int64_t>(want.out.size()));
        const ErrorStats lse =
            compare_buffers(want.lse.data(), got.lse.data(), static_cast<std::int64_t>(want.lse.size()));
        INFO("out nmse " << out.nmse << " max " << out.max_abs << ", lse nmse " << lse.nmse << " max " << lse.max_abs);
        CHECK(within(out, 1e-4, 0.05));
        CHECK(within(lse, 1e-8, 1e-2));
        if (l.kv_heads != l.heads) continue;  // the backward graph takes equal heads only

        const auto dout = random_16bit(l.batch * l.seq * l.dout_stride, l.dtype, 8);
        const auto want_grads = sdpa_cpu_backward(l, want, dout);
        const auto got_grads = cudnn_backward(l, want, dout, load.library->api);
        const ErrorStats grads = compare_buffers(want_grads.data(), l.dtype, got_grads.data(), l.dtype,
                                                 static_cast<std::int64_t>(want_grads.size()));
        INFO("dq, dk, dv nmse " << grads.nmse << " max " << grads.max_abs);
        CHECK(within(grads, 1e-3, 0.25));
    }
}
