// cuDNN's fused attention graphs (kernels/cuda/host/sdpa_graph.h) on a real
// device: a plan is found for each, and the forward's output and log-sum-exp,
// and the backward's dQ, dK and dV, agree with the CPU backend's flash
// attention on the same 16-bit inputs, with grouped heads (forward) and a
// length that is not a multiple of 128. Prints each plan's workspace.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>
#include <vector>

#include "kernels/compare.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/host/cudnn_plan.h"
#include "kernels/cuda/host/sdpa_graph.h"
#include "tests/backend_test_util.h"

using namespace tune::kernels;
using namespace tune::kernels::cuda;

namespace {

struct Buffers {
    std::vector<std::uint16_t> qkv, out;
    std::vector<float> lse;
};

cudnn::SdpaLayout layout_of(DType dtype, std::int64_t kv_heads, std::int64_t seq) {
    cudnn::SdpaLayout l;
    l.batch = 2, l.heads = 8, l.kv_heads = kv_heads, l.seq = seq, l.head_dim = 64, l.dtype = dtype;
    l.q_stride = l.k_stride = l.v_stride = (l.heads + 2 * kv_heads) * l.head_dim;
    l.o_stride = l.dout_stride = l.heads * l.head_dim;
    return l;
}

AttentionForwardArgs args_of(const cudnn::SdpaLayout& l, const void* qkv, void* out, float* lse) {
    const auto* base = static_cast<const std::uint8_t*>(qkv);
    const std::int64_t hd = l.head_dim;
    return AttentionForwardArgs{.shape = {l.batch, l.seq, l.heads, l.kv_heads, hd},
                                .kind = AttentionKind::fused,
                                .dtype = l.dtype,
                                .q = base,
                                .k = base + 2 * l.heads * hd,
                                .v = base + 2 * (l.heads + l.kv_heads) * hd,
                                .q_stride = l.q_stride,
                                .k_stride = l.k_stride,
                                .v_stride = l.v_stride,
                                .out = out,
                                .out_stride = l.o_stride,
                                .lse = lse};
}

Buffers cpu_reference(const cudnn::SdpaLayout& l, const std::vector<std::uint16_t>& qkv) {
    CpuBackend cpu;
    Buffers b{qkv, std::vector<std::uint16_t>(l.batch * l.seq * l.o_stride),
              std::vector<float>(l.batch * l.heads * l.seq)};
    const AttentionForwardArgs a = args_of(l, b.qkv.data(), b.out.data(), b.lse.data());
    std::vector<float> ws(cpu.attention_workspace_bytes(a.shape, a.kind, a.dtype) / 4 + 1);
    cpu.attention_forward(a, Workspace{ws.data(), ws.size() * 4});
    return b;
}

Buffers cudnn_run(const cudnn::SdpaLayout& l, const std::vector<std::uint16_t>& qkv, const CudnnApi& api) {
    auto device = make_cuda_backend(0);
    void* handle = nullptr;
    cudnn::check(api, api.create(&handle), "cudnnCreate", "device 0");
    cudnn::check(api, api.set_stream(handle, cuda_stream(*device)), "cudnnSetStream", "the backend's stream");
    const cudnn::SdpaForwardGraph graph(api, l);
    std::string why;
    const auto plan = cudnn::OperationPlan::make(api, handle, graph.operations(), why);
    INFO(why);
    REQUIRE(plan);
    std::printf("cuDNN attention %s b%lld h%lld kv%lld s%lld d%lld: workspace %lld bytes\n",
                std::string(dtype_name(l.dtype)).c_str(), static_cast<long long>(l.batch),
                static_cast<long long>(l.heads), static_cast<long long>(l.kv_heads), static_cast<long long>(l.seq),
                static_cast<long long>(l.head_dim), static_cast<long long>(plan->workspace_bytes()));

    Buffers b{qkv, std::vector<std::uint16_t>(l.batch * l.seq * l.o_stride),
              std::vector<float>(l.batch * l.heads * l.seq)};
    const std::uint64_t qkv_bytes = b.qkv.size() * 2, out_bytes = b.out.size() * 2, lse_bytes = b.lse.size() * 4;
    const std::uint64_t ws_bytes = std::max<std::int64_t>(plan->workspace_bytes(), 16);
    void* d_qkv = device->allocate(qkv_bytes);
    void* d_out = device->allocate(out_bytes);
    void* d_lse = device->allocate(lse_bytes);
    void* d_ws = device->allocate(ws_bytes);
    device->copy_to_device(d_qkv, b.qkv.data(), qkv_bytes);
    auto* base = static_cast<std::uint8_t*>(d_qkv);
    float scale = 1.0f / std::sqrt(static_cast<float>(l.head_dim));
    float masked = std::numeric_limits<float>::lowest();
    using T = cudnn::SdpaTensor;
    const std::vector<std::int64_t> uids{static_cast<std::int64_t>(T::q),           static_cast<std::int64_t>(T::k),
                                         static_cast<std::int64_t>(T::v),           static_cast<std::int64_t>(T::o),
                                         static_cast<std::int64_t>(T::stats),       static_cast<std::int64_t>(T::scale),
                                         static_cast<std::int64_t>(T::masked_value)};
    const std::vector<void*> pointers{
        base,   base + 2 * l.heads * l.head_dim, base + 2 * (l.heads + l.kv_heads) * l.head_dim, d_out, d_lse, &scale,
        &masked};
    plan->execute(handle, uids, pointers, d_ws);
    device->copy_to_host(b.out.data(), d_out, out_bytes);
    device->copy_to_host(b.lse.data(), d_lse, lse_bytes);
    device->synchronize();
    for (auto [p, n] : {std::pair{d_qkv, qkv_bytes}, {d_out, out_bytes}, {d_lse, lse_bytes}, {d_ws, ws_bytes}})
        device->deallocate(p, n);
    api.destroy(handle);
    return b;
}

// The CPU backend's gradients (into one buffer shaped like qkv) for `dout`, given its forward.
std::vector<std::uint16_t> cpu_gradients(const cudnn::SdpaLayout& l, const Buffers& fwd,
                                         const std::vector<std::uint16_t>& dout) {
    CpuBackend cpu;
    const AttentionForwardArgs f = args_of(l, fwd.qkv.data(), nullptr, nullptr);
    std::vector<std::uint16_t> grads(fwd.qkv.size());
    auto* g = reinterpret_cast<std::uint8_t*>(grads.data());
    const std::int64_t hd = l.head_dim;
    AttentionBackwardArgs b{.shape = f.shape,
                            .kind = AttentionKind::fused,
                            .dtype = l.dtype,
                            .q = f.q,
                            .k = f.k,
                            .v = f.v,
                            .q_stride = l.q_stride,
                            .k_stride = l.k_stride,
                            .v_stride = l.v_stride,
                            .out = fwd.out.data(),
                            .lse = fwd.lse.data(),
                            .out_stride = l.o_stride,
                            .dout = dout.data(),
                            .dout_stride = l.dout_stride,
                            .dq = g,
                            .dk = g + 2 * l.heads * hd,
                            .dv = g + 2 * (l.heads + l.kv_heads) * hd};
    std::vector<float> ws(cpu.attention_workspace_bytes(b.shape, b.kind, b.dtype) / 4 + 1);
    cpu.attention_backward(b, Workspace{ws.data(), ws.size() * 4});
    return grads;
}

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

std::vector<std::uint16_t> cudnn_gradients(const cudnn::SdpaLayout& l, const Buffers& fwd,
                                           const std::vector<std::uint16_t>& dout, const CudnnApi& api) {
    auto device = make_cuda_backend(0);
    void* handle = nullptr;
    cudnn::check(api, api.create(&handle), "cudnnCreate", "device 0");
    cudnn::check(api, api.set_stream(handle, cuda_stream(*device)), "cudnnSetStream", "the backend's stream");
    const cudnn::SdpaBackwardGraph graph(api, l);
    std::string why;
    const auto plan = cudnn::OperationPlan::make(api, handle, graph.operations(), why);
    INFO(why);
    REQUIRE(plan);
    std::printf("cuDNN attention backward %s s%lld: workspace %lld bytes, dQ accumulator %lld bytes\n",
                std::string(dtype_name(l.dtype)).c_str(), static_cast<long long>(l.seq),
                static_cast<long long>(plan->workspace_bytes()),
                static_cast<long long>(cudnn::sdpa_dq_accumulator_bytes(l)));
    const DeviceCopy qkv(*device, fwd.qkv), out(*device, fwd.out), lse(*device, fwd.lse), d_out(*device, dout);
    std::vector<std::uint16_t> grads(fwd.qkv.size());
    const DeviceCopy d_grads(*device, grads);
    const DeviceCopy accumulator(*device, std::vector<float>(cudnn::sdpa_dq_accumulator_bytes(l) / 4, 0.0f));
    const DeviceCopy workspace(*device, std::vector<std::uint8_t>(std::max<std::int64_t>(plan->workspace_bytes(), 16)));
    auto* base = static_cast<std::uint8_t*>(qkv.at);
    auto* g = static_cast<std::uint8_t*>(d_grads.at);
    const std::int64_t k_at = 2 * l.heads * l.head_dim, v_at = 2 * (l.heads + l.kv_heads) * l.head_dim;
    float scale = 1.0f / std::sqrt(static_cast<float>(l.head_dim)), masked = std::numeric_limits<float>::lowest(),
          one = 1.0f;
    using T = cudnn::SdpaTensor;
    std::vector<std::int64_t> uids;
    std::vector<void*> pointers;
    for (auto [t, p] : {std::pair<T, void*>{T::q, base},
                        {T::k, base + k_at},
                        {T::v, base + v_at},
                        {T::o, out.at},
                        {T::stats, lse.at},
                        {T::dout, d_out.at},
                        {T::dq, g},
                        {T::dk, g + k_at},
                        {T::dv, g + v_at},
                        {T::scale, &scale},
                        {T::masked_value, &masked},
                        {T::one, &one},
                        {T::dq_accumulator, accumulator.at}}) {
        uids.push_back(static_cast<std::int64_t>(t));
        pointers.push_back(p);
    }
    plan->execute(handle, uids, pointers, workspace.at);
    device->copy_to_host(grads.data(), d_grads.at, d_grads.bytes);
    device->synchronize();
    api.destroy(handle);
    return grads;
}

}  // namespace

TEST_CASE("cuDNN's fused attention graph runs here and agrees with the CPU backend's flash attention") {
#ifdef TUNE_CUDA_EMU
    WARN("the emulated device has no cuDNN: libcudnn drives the real CUDA runtime");
    return;
#endif
    const CudnnLoad load = load_cudnn();
    if (!load.library) {
        WARN("cuDNN is not usable, so tune's own attention kernels run: " << load.why_not);
        return;
    }
    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (const auto& l :
         {layout_of(DType::bf16, 8, 1000), layout_of(DType::f16, 2, 256), layout_of(DType::f16, 8, 256)}) {
        INFO(dtype_name(l.dtype) << ", kv heads " << l.kv_heads << ", seq " << l.seq);
        std::vector<float> values(l.batch * l.seq * l.q_stride);
        for (float& v : values) v = normal(rng);
        const auto qkv = tune::testing::to_storage(values, l.dtype);
        const Buffers want = cpu_reference(l, qkv);
        const Buffers got = cudnn_run(l, qkv, load.library->api);
        const ErrorStats out = compare_buffers(want.out.data(), l.dtype, got.out.data(), l.dtype,
                                               static_cast<std::int64_t>(want.out.size()));
        const ErrorStats lse =
            compare_buffers(want.lse.data(), got.lse.data(), static_cast<std::int64_t>(want.lse.size()));
        INFO("out nmse " << out.nmse << " max " << out.max_abs << ", lse nmse " << lse.nmse << " max " << lse.max_abs);
        CHECK(within(out, 1e-4, 0.05));
        CHECK(within(lse, 1e-8, 1e-2));
        if (l.kv_heads != l.heads) continue;  // the backward graph takes equal heads only

        std::vector<float> dy(l.batch * l.seq * l.dout_stride);
        for (float& v : dy) v = normal(rng);
        const auto dout = tune::testing::to_storage(dy, l.dtype);
        const auto want_grads = cpu_gradients(l, want, dout);
        const auto got_grads = cudnn_gradients(l, want, dout, load.library->api);
        const ErrorStats grads = compare_buffers(want_grads.data(), l.dtype, got_grads.data(), l.dtype,
                                                 static_cast<std::int64_t>(want_grads.size()));
        INFO("dq, dk, dv nmse " << grads.nmse << " max " << grads.max_abs);
        CHECK(within(grads, 1e-3, 0.25));
    }
}
