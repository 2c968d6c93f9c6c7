#include "train/model.h"

#include <algorithm>
#include <initializer_list>

namespace tune::train {

namespace {

using kernels::DType;

void* offset(void* p, std::int64_t elements, DType dt) {
    return static_cast<unsigned char*>(p) + elements * static_cast<std::int64_t>(kernels::dtype_bytes(dt));
}

std::uint64_t bytes_of(std::int64_t elements, DType dt) {
    return static_cast<std::uint64_t>(elements) * kernels::dtype_bytes(dt);
}

// One GEMM's shape: C (m, n) = op(A) (m, k) op(B) (k, n).
struct GemmShape {
    std::int64_t m, n, k;
    bool ta, tb;
};

// lda 0: A's rows are packed (op(A)'s m or k); else A's row stride.
kernels::GemmArgs gemm_args(const GemmShape& g, const void* a, const void* b, void* c, float beta, DType dt,
                            std::int64_t lda = 0) {
    kernels::GemmArgs args;
    args.m = g.m, args.n = g.n, args.k = g.k;
    args.trans_a = g.ta, args.trans_b = g.tb;
    args.a = a, args.lda = lda != 0 ? lda : g.ta ? g.m : g.k;
    args.b = b, args.ldb = g.tb ? g.k : g.n;
    args.c = c, args.ldc = g.n;
    args.beta = beta;
    args.a_dtype = args.b_dtype = args.c_dtype = dt;
    return args;
}

}  // namespace

math::RopeFrequencies rope_frequencies(const ModelSpec& m) {
    math::RopeFrequencies f;
    f.theta = static_cast<float>(m.rope_theta);
    const RopeScaling& r = m.rope_scaling;
    if (r.type == "linear" || r.type == "llama3") {
        f.scaling = r.type == "linear" ? math::RopeScalingKind::linear : math::RopeScalingKind::llama3;
        f.factor = static_cast<float>(r.factor);
        f.low_freq_factor = static_cast<float>(r.low_freq_factor);
        f.high_freq_factor = static_cast<float>(r.high_freq_factor);
        f.original_context = static_cast<float>(r.original_context);
    }
    return f;
}

Dims make_dims(const ModelSpec& m, std::int64_t micro_batch, std::int64_t context, Attention attention) {
    Dims d;
    d.b = micro_batch, d.s = context, d.T = micro_batch * context;
    d.h = static_cast<std::int64_t>(m.hidden), d.q = static_cast<std::int64_t>(m.q_dim());
    d.kv = static_cast<std::int64_t>(m.kv_dim());
    d.f = static_cast<std::int64_t>(m.ffn), d.V = static_cast<std::int64_t>(m.vocab);
    d.heads = static_cast<std::int64_t>(m.heads), d.kv_heads = static_cast<std::int64_t>(m.kv_heads);
    d.d = static_cast<std::int64_t>(m.head_dim()), d.L = static_cast<std::int64_t>(m.layers);
    d.eps = static_cast<float>(m.rms_norm_eps);
    d.rope = rope_frequencies(m);
    d.qk_norm = m.qk_norm;
    d.attention = attention == Attention::flash ? kernels::AttentionKind::fused : kernels::AttentionKind::materialized;
    return d;
}

kernels::AttentionShape LlamaLayer::attention_shape() const {
    return {dims_.b, dims_.s, dims_.heads, dims_.kv_heads, dims_.d};
}

std::uint64_t LlamaLayer::workspace_bytes() const {
    const Dims& d = dims_;
    // Every layer GEMM, forward and backward (§6: a backward GEMM has its forward's three sizes).
    // Bias GEMMs (k = 1 forward, m = 1 backward) are smaller than their linear's.
    const std::initializer_list<GemmShape> shapes{
        {d.T, d.q, d.h, false, true},  {d.T, d.h, d.q, false, true},   {d.T, d.kv, d.h, false, true},
        {d.T, d.f, d.h, false, true},  {d.T, d.h, d.f, false, true},   {d.T, d.f, d.h, false, false},
        {d.h, d.f, d.T, true, false},  {d.T, d.h, d.f, false, false},  {d.f, d.h, d.T, true, false},
        {d.T, d.q, d.h, false, false}, {d.h, d.q, d.T, true, false},   {d.T, d.h, d.q, false, false},
        {d.q, d.h, d.T, true, false},  {d.T, d.h, d.kv, false, false}, {d.kv, d.h, d.T, true, false}};
    const std::int64_t qkv = d.q + 2 * d.kv;
    const std::initializer_list<GemmShape> fused_qkv{{d.T, qkv, d.h, false, true}, {d.T, d.h, qkv, false, false}};
    const std::initializer_list<GemmShape> fused_gate_up{{d.T, 2 * d.f, d.h, false, true},
                                                         {d.T, d.h, 2 * d.f, false, false}};
    std::uint64_t most = backend_.attention_workspace_bytes(attention_shape(), d.attention, dt_);
    const auto fit = [&](const std::initializer_list<GemmShape>& list) {
        for (const GemmShape& g : list)
            most = std::max(most, backend_.gemm_workspace_bytes(gemm_args(g, nullptr, nullptr, nullptr, 0.0f, dt_)));
    };
    fit(shapes);
    if (fused_qkv_) fit(fused_qkv);
    if (fused_gate_up_) fit(fused_gate_up);
    return most;
}

const void* LlamaLayer::weight(const void* weights, LayerTensor t) const {
    if (dequantized_ == nullptr) return offset(const_cast<void*>(weights), layout_.at(t).offset, dt_);
    const auto* q = static_cast<const QuantizedLayer*>(weights);
    const TensorView& v = layout_.at(t);
    if (!v.matrix()) return offset(const_cast<void*>(q->vectors), layout_.vector_offset(t), dt_);
    backend_.nf4_dequantize(dequantized_, dt_, q->nf4, q->n, v.offset, v.numel());
    return dequantized_;
}

std::int64_t LlamaLayer::largest_matrix() const {
    std::int64_t most = 0;
    for (const TensorView& v : layout_.layer.tensors)
        if (v.matrix()) most = std::max(most, v.numel());
    return most;
}

Buffer LlamaLayer::act(std::int64_t elements) const {
    return memory_.allocate(Component::activations, bytes_of(elements, dt_));
}

void LlamaLayer::gemm(const void* a, bool ta, const void* b, bool tb, void* c, std::int64_t m, std::int64_t n,
                      std::int64_t k, float beta, const void* c_in) const {
    kernels::GemmArgs args = gemm_args({m, n, k, ta, tb}, a, b, c, beta, dt_);
    args.c_in = c_in;
    backend_.gemm(args, ws_);
}

void LlamaLayer::attention(LayerActivations& a) const {
    kernels::AttentionForwardArgs args;
    args.shape = attention_shape();
    args.dtype = dt_;
    args.q = a.q.get(), args.k = k_out(a), args.v = v_out(a);
    args.q_stride = q_stride(), args.k_stride = kv_stride(), args.v_stride = kv_stride();
    args.out = a.o.get(), args.out_stride = dims_.q;
    args.kind = dims_.attention;
    if (flash())
        args.lse = a.probs.as<float>();
    else
        args.probs = a.probs.get();
    backend_.attention_forward(args, ws_);
}

bool LlamaLayer::flash() const { return dims_.attention == kernels::AttentionKind::fused; }

namespace {

// Whether tensors follow each other in the layout with nothing between them.
bool adjacent(const ParamLayout& layout, std::initializer_list<LayerTensor> tensors) {
    std::int64_t next = -1;
    for (LayerTensor t : tensors) {
        const TensorView& v = layout.at(t);
        if (next >= 0 && v.offset != next) return false;
        next = v.offset + v.numel();
    }
    return true;
}

}  // namespace

void LlamaLayer::set_fused_projections(bool qkv, bool gate_up) {
    if ((qkv && !adjacent(layout_, {LayerTensor::q, LayerTensor::k, LayerTensor::v})) ||
        (gate_up && !adjacent(layout_, {LayerTensor::gate, LayerTensor::up})))
        throw std::logic_error("fused projections need their weights adjacent in the layer's layout");
    fused_qkv_ = qkv;
    fused_gate_up_ = gate_up;
}

void* LlamaLayer::k_out(const LayerActivations& a) const {
    return fused_qkv_ ? offset(a.q.get(), dims_.q, dt_) : a.k.get();
}

void* LlamaLayer::v_out(const LayerActivations& a) const {
    return fused_qkv_ ? offset(a.q.get(), dims_.q + dims_.kv, dt_) : a.v.get();
}

const void* LlamaLayer::up_out(const LayerActivations& a) const {
    return fused_gate_up() ? offset(a.g.get(), dims_.f, dt_) : a.u.get();
}

Buffer LlamaLayer::attention_keep() const {
    const Dims& d = dims_;
    // Flash: the log-sum-exp, fp32. Eager: the probabilities, layer dtype.
    if (flash()) return memory_.allocate(Component::activations, bytes_of(d.b * d.heads * d.s, DType::f32));
    return act(d.b * d.heads * d.s * d.s);
}

LoraLinear LlamaLayer::lora_linear(LayerTensor t) const {
    const TensorView& w = layout_.at(t);
    return LoraLinear{backend_, ws_, dt_, dims_.T, w.cols, w.rows, lora_->rank, lora_->scale};
}

void LlamaLayer::lora_forward(LayerActivations& a, LayerTensor t, const void* x, void* y) const {
    if (lora_ == nullptr) return;
    const auto j = lora_slot(t, lora_->targets);
    if (!j) return;
    const FlatLayout& f = lora_->layout.layer;
    void* xa = offset(a.xa.get(), static_cast<std::int64_t>(*j) * dims_.T * lora_->rank, dt_);
    const void* A = offset(const_cast<void*>(adapters_), f.tensors[2 * *j].offset, dt_);
    const void* B = offset(const_cast<void*>(adapters_), f.tensors[2 * *j + 1].offset, dt_);
    if (y == nullptr)
        lora_linear(t).project(x, A, xa);
    else
        lora_linear(t).forward(x, A, B, xa, y);
}

void LlamaLayer::lora_backward(LayerActivations& a, LayerTensor t, const void* x, const void* dy, void* dx, void* tmp,
                               GradSink& sink, std::size_t layer) const {
    if (lora_ == nullptr) return;
    const auto j = lora_slot(t, lora_->targets);
    if (!j) return;
    const FlatLayout& f = lora_->layout.layer;
    const void* xa = offset(a.xa.get(), static_cast<std::int64_t>(*j) * dims_.T * lora_->rank, dt_);
    const void* A = offset(const_cast<void*>(adapters_), f.tensors[2 * *j].offset, dt_);
    const void* B = offset(const_cast<void*>(adapters_), f.tensors[2 * *j + 1].offset, dt_);
    const LoraLinear lin = lora_linear(t);
    lin.backward_input(dy, B, A, tmp, dx);  // before a LOMO sink updates A or B
    const GradTarget da = sink.begin_whole(layer, 2 * *j);
    lin.grad_a(tmp, x, da.ptr, da.beta());
    sink.end(layer, 2 * *j);
    const GradTarget db = sink.begin_whole(layer, 2 * *j + 1);
    lin.grad_b(dy, xa, db.ptr, db.beta());
    sink.end(layer, 2 * *j + 1);
}

GradTarget LlamaLayer::weight_grad(GradSink& sink, std::size_t layer, LayerTensor t) const {
    return lora_ != nullptr ? GradTarget{} : sink.begin_whole(layer, layout_.index(t));
}

void* LlamaLayer::norm_grad(GradSink& sink, std::size_t layer, LayerTensor t) const {
    return lora_ != nullptr ? norm_sink_ : sink.begin(layer, layout_.index(t));
}

void LlamaLayer::end_grad(GradSink& sink, std::size_t layer, LayerTensor t) const {
    if (lora_ == nullptr) sink.end(layer, layout_.index(t));
}

void LlamaLayer::add_bias(const void* w, LayerTensor t, void* y) const {
    if (!layout_.has(t)) return;
    // A bias every tensor-parallel rank holds whole (o's, down's) goes once into the sum the group reduces.
    if (tensor_group_ != nullptr && tensor_group_->rank() != 0 && parallel_split(t) == ParallelSplit::none) return;
    gemm(ones_, false, weight(w, t), false, y, dims_.T, layout_.at(t).numel(), 1, 1.0f);
}

void LlamaLayer::bias_grad(const void* dy, LayerTensor t, GradSink& sink, std::size_t layer) const {
    if (!layout_.has(t) || lora_ != nullptr) return;
    const GradTarget db = weight_grad(sink, layer, t);
    gemm(ones_, true, dy, false, db.ptr, 1, layout_.at(t).numel(), dims_.T, db.beta());
    end_grad(sink, layer, t);
}

void LlamaLayer::qk_norm_forward(const void* w, LayerActivations& a) const {
    const Dims& d = dims_;
    backend_.rmsnorm_forward(a.q.get(), a.rstd_q.as<float>(), a.qp.get(), weight(w, LayerTensor::q_norm), d.T * d.heads,
                             d.d, d.eps, dt_);
    backend_.rmsnorm_forward(a.k.get(), a.rstd_k.as<float>(), a.kp.get(), weight(w, LayerTensor::k_norm),
                             d.T * d.kv_heads, d.d, d.eps, dt_);
}

void LlamaLayer::qk_norm_backward(const void* w, LayerActivations& a, const void* dq, const void* dk, void* dq_out,
                                  void* dk_out, GradSink& sink, std::size_t layer) const {
    const Dims& d = dims_;
    // LoRA: the frozen norms' gradients go to the throwaway sink (h >= d).
    void* dw = norm_grad(sink, layer, LayerTensor::q_norm);
    backend_.rmsnorm_backward(dq_out, dw, dq, a.qp.get(), weight(w, LayerTensor::q_norm), a.rstd_q.as<float>(),
                              d.T * d.heads, d.d, false, dt_);
    end_grad(sink, layer, LayerTensor::q_norm);
    dw = norm_grad(sink, layer, LayerTensor::k_norm);
    backend_.rmsnorm_backward(dk_out, dw, dk, a.kp.get(), weight(w, LayerTensor::k_norm), a.rstd_k.as<float>(),
                              d.T * d.kv_heads, d.d, false, dt_);
    end_grad(sink, layer, LayerTensor::k_norm);
}

void LlamaLayer::forward(const void* w, LayerActivations& a, void* out, const void* adapters) {
    const Dims& d = dims_;
    adapters_ = adapters;
    if (lora_ != nullptr) a.xa = act(static_cast<std::int64_t>(lora_targets(lora_->targets)) * d.T * lora_->rank);
    const std::int64_t r = rows();  // the residual stream's rows on this rank
    a.rstd1 = memory_.allocate(Component::activations, bytes_of(r, DType::f32));
    a.n1 = act(r * d.h);
    if (d.qk_norm) {
        a.qp = act(d.T * d.q), a.kp = act(d.T * d.kv);
        a.rstd_q = memory_.allocate(Component::activations, bytes_of(d.T * d.heads, DType::f32));
        a.rstd_k = memory_.allocate(Component::activations, bytes_of(d.T * d.kv_heads, DType::f32));
    }
    if (fused_qkv_)
        a.q = act(d.T * q_stride());
    else
        a.q = act(d.T * d.q), a.k = act(d.T * d.kv), a.v = act(d.T * d.kv);
    a.probs = attention_keep(), a.o = act(d.T * d.q), a.x2 = act(r * d.h);
    a.rstd2 = memory_.allocate(Component::activations, bytes_of(r, DType::f32));
    a.n2 = act(r * d.h);
    if (fused_gate_up())
        a.g = act(2 * d.T * d.f);
    else
        a.g = act(d.T * d.f), a.u = act(d.T * d.f);
    a.m = act(d.T * d.f);

    backend_.rmsnorm_forward(a.n1.get(), a.rstd1.as<float>(), a.x.get(), weight(w, LayerTensor::attn_norm), r, d.h,
                             d.eps, dt_);
    void* qp = d.qk_norm ? a.qp.get() : a.q.get();  // the projections, normed into q, k after
    void* kp = d.qk_norm ? a.kp.get() : a.k.get();
    if (fused_qkv_) {
        gemm(a.n1.get(), false, weight(w, LayerTensor::q), true, a.q.get(), d.T, q_stride(), d.h, 0.0f);  // [q k v]
    } else {
        const EveryToken n1 = every_token(a.n1.get());
        project(w, a, LayerTensor::q, LayerTensor::q_bias, n1.ptr, qp, d.q, d.h, 0.0f);          // q (T, q)
        project(w, a, LayerTensor::k, LayerTensor::k_bias, n1.ptr, kp, d.kv, d.h, 0.0f);         // k (T, kv)
        project(w, a, LayerTensor::v, LayerTensor::v_bias, n1.ptr, a.v.get(), d.kv, d.h, 0.0f);  // v (T, kv)
    }
    if (d.qk_norm) qk_norm_forward(w, a);
    backend_.rope_forward(a.q.get(), q_stride(), a.q.get(), q_stride(), d.b, d.s, d.heads, d.d, d.rope, dt_);
    backend_.rope_forward(k_out(a), kv_stride(), k_out(a), kv_stride(), d.b, d.s, d.kv_heads, d.d, d.rope, dt_);
    attention(a);
    attention_residual(w, a);
    backend_.rmsnorm_forward(a.n2.get(), a.rstd2.as<float>(), a.x2.get(), weight(w, LayerTensor::mlp_norm), r, d.h,
                             d.eps, dt_);
    if (fused_gate_up()) {
        gemm(a.n2.get(), false, weight(w, LayerTensor::gate), true, a.g.get(), d.T, 2 * d.f, d.h,
             0.0f);  // [g u] (T, 2f)
    } else {
        const EveryToken n2 = every_token(a.n2.get());
        project(w, a, LayerTensor::gate, LayerTensor::gate_bias, n2.ptr, a.g.get(), d.f, d.h, 0.0f);  // g (T, f)
        project(w, a, LayerTensor::up, LayerTensor::up_bias, n2.ptr, a.u.get(), d.f, d.h, 0.0f);      // u (T, f)
    }
    backend_.swiglu_forward(a.m.get(), gate_out(a), up_out(a), d.T, d.f, gate_up_stride(), dt_);
    if (out == nullptr) {
        lora_forward(a, LayerTensor::down, a.m.get(), nullptr);  // recompute: only m Ad^T, for dBd
        return;
    }
    row_parallel(w, a, LayerTensor::down, LayerTensor::down_bias, a.m.get(), d.f, a.x2.get(),
                 out);  // out = x2 + m Wd^T
}

void LlamaLayer::row_parallel(const void* w, LayerActivations& a, LayerTensor t, LayerTensor bias, const void* x,
                              std::int64_t k, const void* residual, void* out) {
    const Dims& d = dims_;
    if (!sequence_parallel_) {
        project(w, a, t, bias, x, out, d.h, k, 0.0f, adds_residual() ? residual : nullptr);
        reduce_over_group(out);
        return;
    }
    // This rank's part of the whole (T, h) product, reduce-scattered, added to its rows of the residual.
    Buffer y = memory_.allocate(Component::comm, bytes_of(d.T * d.h, dt_));
    project(w, a, t, bias, x, y.get(), d.h, k, 0.0f);
    backend_.add(out, residual, reduce_over_group(y.get()), rows() * d.h, dt_);
}

LlamaLayer::EveryToken LlamaLayer::every_token(const void* part) const {
    if (!sequence_parallel_) return {Buffer{}, part};
    const std::int64_t r = rows() * dims_.h;
    Buffer whole = memory_.allocate(Component::comm, bytes_of(dims_.T * dims_.h, dt_));
    backend_.copy(whole.at(bytes_of(tensor_group_->rank() * r, dt_)), part, bytes_of(r, dt_));
    tensor_group_->all_gather(whole.get(), dims_.T * dims_.h, dt_);
    const void* ptr = whole.get();
    return {std::move(whole), ptr};
}

void* LlamaLayer::reduce_over_group(void* y) const {
    if (tensor_group_ == nullptr) return y;
    const std::int64_t n = dims_.T * dims_.h;
    if (!sequence_parallel_) {
        tensor_group_->all_reduce(y, n, dt_, ReduceOp::sum);
        return y;
    }
    tensor_group_->reduce_scatter(y, n, dt_, ReduceOp::sum);
    return offset(y, tensor_group_->rank() * rows() * dims_.h, dt_);
}

void LlamaLayer::project(const void* w, LayerActivations& a, LayerTensor t, LayerTensor bias, const void* x, void* y,
                         std::int64_t n, std::int64_t k, float beta, const void* residual) {
    gemm(x, false, weight(w, t), true, y, dims_.T, n, k, residual != nullptr ? 1.0f : beta, residual);
    add_bias(w, bias, y);
    lora_forward(a, t, x, y);
}

void LlamaLayer::attention_residual(const void* w, LayerActivations& a) {
    row_parallel(w, a, LayerTensor::o, LayerTensor::o_bias, a.o.get(), dims_.q, a.x.get(), a.x2.get());
}

void LlamaLayer::drop(LayerActivations& a, Checkpointing mode) const {
    switch (mode) {
        case Checkpointing::none:
            return;
        // Selective drops the eager probabilities; flash's lse is O(s) and kept,
        // so selective with flash recomputes nothing (docs/memory-model.md §3).
        case Checkpointing::selective:
            if (!flash()) a.probs.reset();
            return;
        // torchtitan's op policy (_apply_ac_to_transformer_block's _custom_policy,
        // models/llama3/parallelize_llama.py at the published runs' commits) saves
        // the outputs of the layer's matmuls but every second one (q, v, gate and
        // down kept; k, o and up recomputed) and the attention output and lse; the
        // norms, RoPE and SwiGLU are recomputed. Our q and k are saved after RoPE
        // (one buffer each); down's output is the next layer's input, which that
        // layer keeps. With q/k norms k stays: its norm runs with q's.
        case Checkpointing::selective_op:
            a.rstd1.reset(), a.n1.reset(), a.x2.reset(), a.rstd2.reset(), a.n2.reset(), a.u.reset(), a.m.reset();
            if (!dims_.qk_norm) a.k.reset();
            return;
        case Checkpointing::full:
            break;
    }
    Buffer keep = std::move(a.x);
    a = LayerActivations{};
    a.x = std::move(keep);
}

void LlamaLayer::recompute(const void* w, LayerActivations& a, Checkpointing mode, const void* adapters) {
    if (mode == Checkpointing::full) {
        forward(w, a, nullptr, adapters);
    } else if (mode == Checkpointing::selective && !flash()) {
        a.probs = attention_keep();
        attention(a);  // rewrites o with the same values
    } else if (mode == Checkpointing::selective_op) {
        adapters_ = adapters;
        recompute_unsaved(w, a);
    }
}

// What selective_op dropped, from the layer input and the saved q, v, o and g:
// n1, then k (projection, bias, adapter, RoPE), x2 = x + o Wo^T, n2, u and m.
void LlamaLayer::recompute_unsaved(const void* w, LayerActivations& a) {
    const Dims& d = dims_;
    const std::int64_t r = rows();  // the residual stream's rows on this rank
    a.rstd1 = memory_.allocate(Component::activations, bytes_of(r, DType::f32));
    a.n1 = act(r * d.h);
    if (!d.qk_norm) a.k = act(d.T * d.kv);
    a.x2 = act(r * d.h);
    a.rstd2 = memory_.allocate(Component::activations, bytes_of(r, DType::f32));
    a.n2 = act(r * d.h), a.u = act(d.T * d.f), a.m = act(d.T * d.f);

    backend_.rmsnorm_forward(a.n1.get(), a.rstd1.as<float>(), a.x.get(), weight(w, LayerTensor::attn_norm), r, d.h,
                             d.eps, dt_);
    if (!d.qk_norm) {
        const EveryToken n1 = every_token(a.n1.get());
        project(w, a, LayerTensor::k, LayerTensor::k_bias, n1.ptr, a.k.get(), d.kv, d.h, 0.0f);
        backend_.rope_forward(a.k.get(), d.kv, a.k.get(), d.kv, d.b, d.s, d.kv_heads, d.d, d.rope, dt_);
    }
    attention_residual(w, a);
    backend_.rmsnorm_forward(a.n2.get(), a.rstd2.as<float>(), a.x2.get(), weight(w, LayerTensor::mlp_norm), r, d.h,
                             d.eps, dt_);
    {
        const EveryToken n2 = every_token(a.n2.get());
        project(w, a, LayerTensor::up, LayerTensor::up_bias, n2.ptr, a.u.get(), d.f, d.h, 0.0f);
    }
    backend_.swiglu_forward(a.m.get(), a.g.get(), a.u.get(), d.T, d.f, d.f, dt_);
}

void LlamaLayer::row_parallel_backward(const void* w, LayerActivations& a, LayerTensor t, LayerTensor bias,
                                       const void* x, const void* dx, void* din, std::int64_t k, GradSink& sink,
                                       std::size_t layer) const {
    const Dims& d = dims_;
    const EveryToken every = every_token(dx);  // the output gradient of every token
    const void* dy = every.ptr;
    bias_grad(dy, bias, sink, layer);
    gemm(dy, false, weight(w, t), false, din, d.T, k, d.h, 0.0f);  // din = dY W
    lora_backward(a, t, x, dy, din, lora_tmp_, sink, layer);
    if (lora_ != nullptr) return;
    const GradTarget dw = weight_grad(sink, layer, t);
    gemm(dy, true, x, false, dw.ptr, d.h, k, d.T, dw.beta());  // dW (+)= dY^T x
    end_grad(sink, layer, t);
}

void LlamaLayer::column_parallel_backward(LayerActivations& a, const void* x, std::initializer_list<ColumnGrad> linears,
                                          void* dn, GradSink& sink, std::size_t layer) const {
    const EveryToken every = every_token(x);
    const void* all = every.ptr;
    for (const ColumnGrad& l : linears) {
        lora_backward(a, l.t, all, l.dy, dn, lora_tmp_, sink, layer);
        if (lora_ != nullptr) continue;
        const GradTarget dw = weight_grad(sink, layer, l.t);
        backend_.gemm(gemm_args({l.n, dims_.h, dims_.T, true, false}, l.dy, all, dw.ptr, dw.beta(), dt_, l.stride),
                      ws_);  // dW (+)= dy^T x
        end_grad(sink, layer, l.t);
    }
}

void LlamaLayer::mlp_backward(const void* w, LayerActivations& a, void* dx, void* dn, void* scratch, GradSink& sink,
                              std::size_t layer) const {
    const Dims& d = dims_;
    void* dm = scratch;                          // (T, f)
    void* dg = offset(scratch, d.T * d.f, dt_);  // (T, f), or fused: (T, 2f) rows [dg | du]
    void* du = fused_gate_up() ? offset(dg, d.f, dt_) : offset(scratch, 2 * d.T * d.f, dt_);
    auto done = [&](LayerTensor t) { end_grad(sink, layer, t); };

    row_parallel_backward(w, a, LayerTensor::down, LayerTensor::down_bias, a.m.get(), dx, dm, d.f, sink, layer);
    backend_.swiglu_backward(dg, du, dm, gate_out(a), up_out(a), d.T, d.f, gate_up_stride(), dt_);
    if (fused_gate_up()) {
        gemm(dg, false, weight(w, LayerTensor::gate), false, dn, d.T, d.h, 2 * d.f, 0.0f);  // dn = [dg du] [Wg; Wu]
        column_parallel_backward(a, a.n2.get(),
                                 {{LayerTensor::gate, dg, d.f, 2 * d.f}, {LayerTensor::up, du, d.f, 2 * d.f}}, dn, sink,
                                 layer);
    } else {
        bias_grad(dg, LayerTensor::gate_bias, sink, layer);
        bias_grad(du, LayerTensor::up_bias, sink, layer);
        gemm(dg, false, weight(w, LayerTensor::gate), false, dn, d.T, d.h, d.f, 0.0f);  // dn = dg Wg + du Wu
        gemm(du, false, weight(w, LayerTensor::up), false, dn, d.T, d.h, d.f, 1.0f);
        column_parallel_backward(a, a.n2.get(), {{LayerTensor::gate, dg, d.f}, {LayerTensor::up, du, d.f}}, dn, sink,
                                 layer);
    }
    const void* dn_rows = reduce_over_group(dn);  // dn was this rank's part of the MLP's input gradient
    void* dnorm = norm_grad(sink, layer, LayerTensor::mlp_norm);
    backend_.rmsnorm_backward(dx, dnorm, dn_rows, a.x2.get(), weight(w, LayerTensor::mlp_norm), a.rstd2.as<float>(),
                              rows(), d.h, true, dt_);
    done(LayerTensor::mlp_norm);
}

void LlamaLayer::attention_backward(const void* w, LayerActivations& a, void* dx, void* dn, void* scratch,
                                    GradSink& sink, std::size_t layer) const {
    const Dims& d = dims_;
    void* dout = scratch;                        // (T, q)
    void* dq = offset(scratch, d.T * d.q, dt_);  // (T, q), or fused: (T, q + 2kv) rows [dq | dk | dv]
    void* dk = fused_qkv_ ? offset(dq, d.q, dt_) : offset(scratch, 2 * d.T * d.q, dt_);                      // (T, kv)
    void* dv = fused_qkv_ ? offset(dq, d.q + d.kv, dt_) : offset(scratch, 2 * d.T * d.q + d.T * d.kv, dt_);  // (T, kv)
    auto done = [&](LayerTensor t) { end_grad(sink, layer, t); };

    row_parallel_backward(w, a, LayerTensor::o, LayerTensor::o_bias, a.o.get(), dx, dout, d.q, sink, layer);
    kernels::AttentionBackwardArgs args;
    args.shape = attention_shape();
    args.dtype = dt_;
    args.q = a.q.get(), args.k = k_out(a), args.v = v_out(a);
    args.q_stride = q_stride(), args.k_stride = kv_stride(), args.v_stride = kv_stride();  // dq, dk, dv's too
    args.kind = d.attention;
    if (flash())
        args.lse = a.probs.as<float>(), args.out = a.o.get(), args.out_stride = d.q;
    else
        args.probs = a.probs.get();
    args.dout = dout, args.dout_stride = d.q;
    args.dq = dq, args.dk = dk, args.dv = dv;
    backend_.attention_backward(args, ws_);
    backend_.rope_backward(dq, q_stride(), dq, q_stride(), d.b, d.s, d.heads, d.d, d.rope, dt_);
    backend_.rope_backward(dk, kv_stride(), dk, kv_stride(), d.b, d.s, d.kv_heads, d.d, d.rope, dt_);
    if (fused_qkv_) {
        const std::int64_t width = q_stride();
        gemm(dq, false, weight(w, LayerTensor::q), false, dn, d.T, d.h, width, 0.0f);  // dn = [dq dk dv] [Wq; Wk; Wv]
        column_parallel_backward(
            a, a.n1.get(),
            {{LayerTensor::q, dq, d.q, width}, {LayerTensor::k, dk, d.kv, width}, {LayerTensor::v, dv, d.kv, width}},
            dn, sink, layer);
    } else {
        if (d.qk_norm) {
            // The projections' gradients into the regions attention no longer needs:
            // dq into do's (T, q), then dk into dq's (T, q >= kv).
            qk_norm_backward(w, a, dq, dk, dout, dq, sink, layer);
            dk = dq, dq = dout;
        }
        bias_grad(dq, LayerTensor::q_bias, sink, layer);
        bias_grad(dk, LayerTensor::k_bias, sink, layer);
        bias_grad(dv, LayerTensor::v_bias, sink, layer);
        gemm(dq, false, weight(w, LayerTensor::q), false, dn, d.T, d.h, d.q, 0.0f);  // dn = dq Wq + dk Wk + dv Wv
        gemm(dk, false, weight(w, LayerTensor::k), false, dn, d.T, d.h, d.kv, 1.0f);
        gemm(dv, false, weight(w, LayerTensor::v), false, dn, d.T, d.h, d.kv, 1.0f);
        column_parallel_backward(a, a.n1.get(),
                                 {{LayerTensor::q, dq, d.q}, {LayerTensor::k, dk, d.kv}, {LayerTensor::v, dv, d.kv}},
                                 dn, sink, layer);
    }
    const void* dn_rows = reduce_over_group(dn);  // dn was this rank's part of attention's input gradient
    void* dnorm = norm_grad(sink, layer, LayerTensor::attn_norm);
    backend_.rmsnorm_backward(dx, dnorm, dn_rows, a.x.get(), weight(w, LayerTensor::attn_norm), a.rstd1.as<float>(),
                              rows(), d.h, true, dt_);
    done(LayerTensor::attn_norm);
}

void LlamaLayer::backward(const void* w, LayerActivations& a, void* dx, GradSink& sink, std::size_t layer,
                          const void* adapters) {
    const Dims& d = dims_;
    adapters_ = adapters;
    // One scratch for all activation gradients (§4 B4): dn (T, h), then the
    // MLP's dm, dg, du (T, f) or attention's do, dq (T, q), dk, dv (T, kv).
    Buffer scratch = act(d.T * (d.h + std::max(3 * d.f, 2 * d.q + 2 * d.kv)));
    // LoRA (§9): dy B (T, r) of one linear at a time, and a sink (h) for the
    // frozen norm weights' gradients, which the kernels always accumulate.
    Buffer lora = lora_ != nullptr ? act(d.T * lora_->rank + d.h) : Buffer{};
    lora_tmp_ = lora.get();
    norm_sink_ = lora_ != nullptr ? offset(lora.get(), d.T * lora_->rank, dt_) : nullptr;
    void* dn = scratch.get();
    void* rest = offset(scratch.get(), d.T * d.h, dt_);
    mlp_backward(w, a, dx, dn, rest, sink, layer);
    attention_backward(w, a, dx, dn, rest, sink, layer);
    lora.reset();
    scratch.reset();
    a = LayerActivations{};
}

}  // namespace tune::train
