#include "kernels/cuda/host/cudnn_attention.h"

#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "kernels/workspace_bytes.h"

namespace tune::kernels::cuda::cudnn {

namespace {

SdpaLayout layout_of(const AttentionShape& s, DType dtype, std::int64_t q, std::int64_t k, std::int64_t v,
                     std::int64_t o, std::int64_t dout) {
    SdpaLayout l;
    l.batch = s.batch, l.heads = s.heads, l.kv_heads = s.kv_heads, l.seq = s.seq, l.head_dim = s.head_dim;
    l.q_stride = q, l.k_stride = k, l.v_stride = v, l.o_stride = o, l.dout_stride = dout, l.dtype = dtype;
    return l;
}

// The by-value scalars of both graphs; cuDNN reads them when the plan is executed.
struct Scalars {
    float scale, masked = std::numeric_limits<float>::lowest(), one = 1.0f;
    explicit Scalars(std::int64_t head_dim) : scale(1.0f / std::sqrt(static_cast<float>(head_dim))) {}
};

struct Binding {
    std::vector<std::int64_t> uids;
    std::vector<void*> pointers;
    void bind(SdpaTensor t, const void* p) {
        uids.push_back(static_cast<std::int64_t>(t));
        pointers.push_back(const_cast<void*>(p));  // cuDNN's variant pack takes void*; inputs are only read
    }
};

// What both graphs bind: q, k, v, the output, its log-sum-exp and the scalars.
Binding common(const void* q, const void* k, const void* v, const void* out, const float* lse, const Scalars& s) {
    Binding b;
    b.bind(SdpaTensor::q, q);
    b.bind(SdpaTensor::k, k);
    b.bind(SdpaTensor::v, v);
    b.bind(SdpaTensor::o, out);
    b.bind(SdpaTensor::stats, lse);
    b.bind(SdpaTensor::scale, &s.scale);
    b.bind(SdpaTensor::masked_value, &s.masked);
    return b;
}

}  // namespace

std::unique_ptr<CudnnAttention> CudnnAttention::open(const CudnnLoad& load, void* stream, Zero zero,
                                                     std::string& why_not) {
    if (!load.library) {
        why_not = load.why_not;
        return nullptr;
    }
    const CudnnApi& api = load.library->api;
    void* handle = nullptr;
    if (const int status = api.create(&handle); status != kStatusSuccess) {
        why_not = fmt::format("cudnnCreate failed with {}", api.get_error_string(status));
        return nullptr;
    }
    if (const int status = api.set_stream(handle, stream); status != kStatusSuccess) {
        why_not = fmt::format("cudnnSetStream failed with {}", api.get_error_string(status));
        api.destroy(handle);
        return nullptr;
    }
    return std::unique_ptr<CudnnAttention>(new CudnnAttention(*load.library, handle, std::move(zero)));
}

CudnnAttention::CudnnAttention(CudnnLibrary library, void* handle, Zero zero)
    : library_(std::move(library)), handle_(handle), zero_(std::move(zero)) {}

CudnnAttention::~CudnnAttention() {
    plans_.clear();  // descriptors before the handle and the library
    library_.api.destroy(handle_);
}

// The workspace the backend answers for fused attention, which the plans fit.
bool CudnnAttention::workspace_fits(const AttentionShape& s, DType dtype, Workspace ws) {
    const std::uint64_t need = workspace::cuda_flash_attention_bytes(
        static_cast<std::uint64_t>(s.batch), static_cast<std::uint64_t>(s.heads), static_cast<std::uint64_t>(s.seq),
        static_cast<std::uint64_t>(s.head_dim), dtype_bytes(dtype));
    return ws.ptr != nullptr && ws.bytes >= need;
}

bool CudnnAttention::refused(const std::string& why) {
    ++fallbacks_;
    last_fallback_ = why;
    return false;
}

CudnnAttention::Plan& CudnnAttention::plan_for(const SdpaLayout& l, bool backward) {
    const Key key{backward ? 1 : 0, static_cast<std::int64_t>(l.dtype),
                  l.batch,          l.heads,
                  l.kv_heads,       l.seq,
                  l.head_dim,       l.q_stride,
                  l.k_stride,       l.v_stride,
                  l.o_stride,       l.dout_stride};
    auto [it, made] = plans_.try_emplace(key);
    Plan& p = it->second;
    if (!made) return p;
    const std::string problem = backward ? sdpa_backward_problem(l) : sdpa_layout_problem(l);
    if (!problem.empty()) {
        p.why_not = problem;
        return p;
    }
    const CudnnApi& api = library_.api;
    std::vector<void*> operations;
    if (backward) {
        p.backward = std::make_unique<SdpaBackwardGraph>(api, l);
        operations = p.backward->operations();
    } else {
        p.forward = std::make_unique<SdpaForwardGraph>(api, l);
        operations = p.forward->operations();
    }
    p.plan = OperationPlan::make(api, handle_, operations, p.why_not);
    const auto bound = static_cast<std::int64_t>(
        workspace::cudnn_attention_plan_bytes(static_cast<std::uint64_t>(l.batch), static_cast<std::uint64_t>(l.heads),
                                              static_cast<std::uint64_t>(l.seq), backward));
    if (p.plan && p.plan->workspace_bytes() > bound) {
        p.why_not = fmt::format("cuDNN's plan wants {} bytes of workspace, above the {} the estimate counts",
                                p.plan->workspace_bytes(), bound);
        p.plan.reset();
    }
    return p;
}

bool CudnnAttention::forward(const AttentionForwardArgs& a, Workspace ws) {
    if (a.kind != AttentionKind::fused) return false;
    const SdpaLayout l = layout_of(a.shape, a.dtype, a.q_stride, a.k_stride, a.v_stride, a.out_stride, a.out_stride);
    Plan& p = plan_for(l, false);
    if (!p.plan) return refused(p.why_not);
    if (!workspace_fits(a.shape, a.dtype, ws)) return refused("a workspace below attention_workspace_bytes()");
    const Scalars s(l.head_dim);
    const Binding b = common(a.q, a.k, a.v, a.out, a.lse, s);
    p.plan->execute(handle_, b.uids, b.pointers, ws.ptr);
    ++forward_calls_;
    return true;
}

bool CudnnAttention::backward(const AttentionBackwardArgs& a, Workspace ws) {
    if (a.kind != AttentionKind::fused) return false;
    if (a.dq == a.dout) return refused("dQ shares dO's memory, which cuDNN's graph reads as it writes dQ");
    const SdpaLayout l = layout_of(a.shape, a.dtype, a.q_stride, a.k_stride, a.v_stride, a.out_stride, a.dout_stride);
    Plan& p = plan_for(l, true);
    if (!p.plan) return refused(p.why_not);
    if (!workspace_fits(a.shape, a.dtype, ws)) return refused("a workspace below attention_workspace_bytes()");
    // The workspace: the fp32 dQ accumulator, zeroed, then the plan's scratch.
    const std::uint64_t accumulator = workspace::aligned(static_cast<std::uint64_t>(sdpa_dq_accumulator_bytes(l)));
    zero_(ws.ptr, accumulator);
    const Scalars s(l.head_dim);
    Binding b = common(a.q, a.k, a.v, a.out, a.lse, s);
    b.bind(SdpaTensor::dout, a.dout);
    b.bind(SdpaTensor::dq, a.dq);
    b.bind(SdpaTensor::dk, a.dk);
    b.bind(SdpaTensor::dv, a.dv);
    b.bind(SdpaTensor::one, &s.one);
    b.bind(SdpaTensor::dq_accumulator, ws.ptr);
    p.plan->execute(handle_, b.uids, b.pointers, static_cast<std::uint8_t*>(ws.ptr) + accumulator);
    ++backward_calls_;
    return true;
}

std::string CudnnAttention::path() const {
    std::string out = fmt::format("cuDNN {}: {} forward and {} backward calls", cudnn_version_text(library_.version),
                                  forward_calls_, backward_calls_);
    if (fallbacks_ > 0) out += fmt::format("; tune's kernels for {} ({})", fallbacks_, last_fallback_);
    return out;
}

}  // namespace tune::kernels::cuda::cudnn
