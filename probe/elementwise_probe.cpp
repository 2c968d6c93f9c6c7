#include "probe/elementwise_probe.h"

namespace tune::probe {
namespace {

constexpr float kNormEps = 1e-5f;
constexpr math::RopeFrequencies kRope{10000.0f};

void fill_noise(kernels::Backend& backend, const Scratch& s, std::uint64_t elements, float scale, std::uint64_t seed,
                kernels::DType dtype) {
    backend.neftune_noise(s.ptr, static_cast<std::int64_t>(elements), scale, seed, dtype);
}

}  // namespace

std::vector<std::int32_t> spread_tokens(std::uint64_t count, std::uint64_t vocab) {
    std::vector<std::int32_t> ids(count);
    for (std::uint64_t i = 0; i < count; ++i) ids[i] = static_cast<std::int32_t>(i * 2654435761ull % vocab);
    return ids;
}

ElementwiseOps::ElementwiseOps(kernels::Backend& be, const ElementwiseRate& e)
    : backend(be),
      shape(e),
      dtype(kernel_dtype(e.dtype)),
      t(static_cast<std::uint64_t>(e.tokens)),
      b(probe_dtype_bytes(e.dtype)),
      x(be, t * e.hidden * b),
      n(be, t * e.hidden * b),
      dx(be, t * e.hidden * b),
      dn(be, t * e.hidden * b),
      w(be, e.hidden * b),
      dw(be, e.hidden * b),
      rstd(be, t * 4),
      q(be, t * e.hidden * b),
      k(be, t * e.kv_dim * b),
      gate(be, t * e.ffn * b),
      up(be, t * e.ffn * b),
      mlp(be, t * e.ffn * b),
      dgate(be, t * e.ffn * b),
      dup(be, t * e.ffn * b),
      logits(be, t * e.vocab * 4),
      dlogits(be, t * e.vocab * b),
      losses(be, t * 4),
      tokens(be, (t + 1) * 4),
      table(be, e.vocab * e.hidden * b),
      dtable(be, e.vocab * e.hidden * b),
      embedding_workspace_bytes(be.embedding_backward_workspace_bytes(e.tokens, e.hidden, e.vocab, dtype)),
      embedding_workspace(be, embedding_workspace_bytes) {
    const std::vector<std::int32_t> ids = spread_tokens(t + 1, static_cast<std::uint64_t>(e.vocab));
    backend.copy_to_device(tokens.ptr, ids.data(), ids.size() * sizeof(std::int32_t));
    const auto h = static_cast<std::uint64_t>(e.hidden), f = static_cast<std::uint64_t>(e.ffn);
    fill_noise(backend, x, t * h, 1.0f, 1, dtype);
    fill_noise(backend, w, h, 1.0f, 2, dtype);
    fill_noise(backend, dn, t * h, 1e-4f, 3, dtype);
    fill_noise(backend, q, t * h, 1.0f, 4, dtype);
    fill_noise(backend, k, t * static_cast<std::uint64_t>(e.kv_dim), 1.0f, 5, dtype);
    fill_noise(backend, gate, t * f, 1.0f, 6, dtype);
    fill_noise(backend, up, t * f, 1.0f, 7, dtype);
    fill_noise(backend, mlp, t * f, 1e-3f, 8, dtype);
    fill_noise(backend, logits, t * static_cast<std::uint64_t>(e.vocab), 1.0f, 9, kernels::DType::f32);
    fill_noise(backend, table, static_cast<std::uint64_t>(e.vocab) * h, 1.0f, 10, dtype);
}

void ElementwiseOps::layer_forward() {
    const std::int64_t h = shape.hidden, kv = shape.kv_dim, f = shape.ffn, rows = shape.tokens;
    const auto norm = [&] {
        backend.rmsnorm_forward(n.ptr, static_cast<float*>(rstd.ptr), x.ptr, w.ptr, rows, h, kNormEps, dtype);
    };
    norm();
    backend.rope_forward(q.ptr, h, q.ptr, h, 1, rows, shape.heads, shape.head_dim, kRope, dtype);
    backend.rope_forward(k.ptr, kv, k.ptr, kv, 1, rows, shape.kv_heads, shape.head_dim, kRope, dtype);
    norm();
    backend.swiglu_forward(mlp.ptr, gate.ptr, up.ptr, rows, f, f, dtype);
}

void ElementwiseOps::layer_backward() {
    const std::int64_t h = shape.hidden, kv = shape.kv_dim, f = shape.ffn, rows = shape.tokens;
    const auto norm_backward = [&] {
        backend.rmsnorm_backward(dx.ptr, dw.ptr, dn.ptr, x.ptr, w.ptr, static_cast<const float*>(rstd.ptr), rows, h,
                                 true, dtype);
    };
    backend.swiglu_backward(dgate.ptr, dup.ptr, mlp.ptr, gate.ptr, up.ptr, rows, f, f, dtype);
    norm_backward();
    backend.rope_backward(q.ptr, h, q.ptr, h, 1, rows, shape.heads, shape.head_dim, kRope, dtype);
    backend.rope_backward(k.ptr, kv, k.ptr, kv, 1, rows, shape.kv_heads, shape.head_dim, kRope, dtype);
    norm_backward();
}

void ElementwiseOps::outer() {
    const std::int64_t h = shape.hidden, v = shape.vocab, rows = shape.tokens;
    const auto* ids = static_cast<const std::int32_t*>(tokens.ptr);
    backend.embedding_forward(x.ptr, ids, table.ptr, rows, h, v, dtype, {});
    backend.rmsnorm_forward(n.ptr, static_cast<float*>(rstd.ptr), x.ptr, w.ptr, rows, h, kNormEps, dtype);
    kernels::CrossEntropyArgs ce;
    ce.rows = rows, ce.vocab = v;
    ce.logits = static_cast<const float*>(logits.ptr), ce.targets = ids;
    ce.losses = static_cast<float*>(losses.ptr), ce.dlogits = dlogits.ptr, ce.dlogits_dtype = dtype;
    backend.cross_entropy(ce);
    backend.rmsnorm_backward(dx.ptr, dw.ptr, dn.ptr, x.ptr, w.ptr, static_cast<const float*>(rstd.ptr), rows, h, true,
                             dtype);
    backend.embedding_backward(dtable.ptr, ids, dx.ptr, rows, h, v, dtype,
                               {embedding_workspace.ptr, embedding_workspace_bytes}, {});
}

void probe_elementwise(kernels::Backend& backend, ElementwiseRate& e, const ProbeSettings& s, double* spent) {
    ElementwiseOps ops(backend, e);
    double spent_forward = 0, spent_backward = 0, spent_outer = 0;
    e.layer_forward_s = seconds_per_call(
        backend, [&] { ops.layer_forward(); }, s, &spent_forward);
    e.layer_backward_s = seconds_per_call(
        backend, [&] { ops.layer_backward(); }, s, &spent_backward);
    e.outer_s = seconds_per_call(
        backend, [&] { ops.outer(); }, s, &spent_outer);
    if (spent) *spent = spent_forward + spent_backward + spent_outer;
}

}  // namespace tune::probe
