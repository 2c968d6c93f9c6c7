#include "probe/probes.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <tuple>

#include "core/offload_plan.h"
#include "core/parallel_plan.h"
#include "core/step_statistics.h"
#include "estimate/collective_calls.h"
#include "estimate/estimate_time.h"
#include "estimate/gemm_calls.h"
#include "estimate/model_flops.h"
#include "estimate/tensor_parallel_calls.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/speed_reference.h"
#include "probe/bucket_probe.h"
#include "probe/dequantize_probe.h"
#include "probe/elementwise_probe.h"
#include "probe/host_link_probe.h"
#include "probe/optimizer_probe.h"
#include "probe/probe_timing.h"

namespace tune::probe {
namespace {

double probe_gemm(kernels::Backend& backend, const GemmRate& g, const ProbeSettings& s, double* spent) {
    const kernels::DType dt = kernel_dtype(g.dtype);
    const kernels::DType c_dt = g.output.fp32 ? kernels::DType::f32 : dt;
    const std::uint64_t e = probe_dtype_bytes(g.dtype);
    const std::uint64_t a_bytes = static_cast<std::uint64_t>(g.m * g.k) * e;
    Scratch a(backend, a_bytes);
    Scratch b(backend, static_cast<std::uint64_t>(g.k * g.n) * e);
    Scratch c(backend, static_cast<std::uint64_t>(g.m * g.n) * kernels::dtype_bytes(c_dt));
    // Values of a step's scale rather than zeros, on which the 16-bit conversions
    // ran 3% faster (a demo fp16 step's GEMMs): activations, weights, gradients.
    backend.neftune_noise(a.ptr, g.m * g.k, 1.0f, 1, dt);
    backend.neftune_noise(b.ptr, g.k * g.n, 0.02f, 2, dt);
    backend.neftune_noise(c.ptr, g.m * g.n, 1e-3f, 3, c_dt);
    kernels::GemmArgs args;
    args.m = g.m, args.n = g.n, args.k = g.k;
    // The trainer's layouts (train/model.cpp): forward, activations (m, k) times weights
    // stored (n, k); dX, dY (m, k) times weights (k, n); dW, dY stored (k, m) transposed
    // times activations (k, n), added to the gradient.
    args.trans_a = g.pass == GemmPass::weight_grad;
    args.trans_b = g.pass == GemmPass::forward;
    args.a = a.ptr, args.lda = args.trans_a ? g.m : g.k;
    args.b = b.ptr, args.ldb = args.trans_b ? g.k : g.n;
    args.c = c.ptr, args.ldc = g.n;
    args.beta = g.pass == GemmPass::weight_grad || g.output.accumulate ? 1.0f : 0.0f;
    args.a_dtype = args.b_dtype = dt;
    args.c_dtype = c_dt;
    // A forward one adds the residual stream, which it reads from its own buffer (train/model.cpp project).
    const bool residual = g.pass == GemmPass::forward && g.output.accumulate;
    Scratch stream(backend, residual ? static_cast<std::uint64_t>(g.m * g.n) * kernels::dtype_bytes(c_dt) : 0);
    if (residual) {
        backend.neftune_noise(stream.ptr, g.m * g.n, 1.0f, 4, c_dt);
        args.c_in = stream.ptr;
    }
    Scratch ws(backend, backend.gemm_workspace_bytes(args));
    // As a step calls it: the op before produced A (activations, or dY), and the
    // weights, saved activations and C were last touched ops ago.
    Scratch produced_a(backend, a_bytes);
    backend.copy(produced_a.ptr, a.ptr, a_bytes);
    const std::function<void()> displace = cache_displacer(backend);
    ProbeSettings as_in_step = s;
    as_in_step.before_each_call = [&] {
        if (s.before_each_call) s.before_each_call();
        displace();
        backend.copy(a.ptr, produced_a.ptr, a_bytes);
    };
    const double t = seconds_per_call(
        backend,
        [&] {
            backend.gemm(args, {ws.ptr, backend.gemm_workspace_bytes(args)});
        },
        as_in_step, spent);
    return 2.0 * static_cast<double>(g.m) * static_cast<double>(g.n) * static_cast<double>(g.k) / t;
}

void probe_attention(kernels::Backend& backend, AttentionRate& a, const ProbeSettings& s, double* spent) {
    const kernels::DType dt = kernel_dtype(a.dtype);
    kernels::AttentionShape shape{a.batch, a.seq, a.heads, a.kv_heads, a.head_dim};
    const auto kind = a.fused ? kernels::AttentionKind::fused : kernels::AttentionKind::materialized;
    const std::uint64_t e = probe_dtype_bytes(a.dtype);
    const std::uint64_t q_bytes = static_cast<std::uint64_t>(a.batch * a.seq * a.heads * a.head_dim) * e;
    const std::uint64_t kv_bytes = static_cast<std::uint64_t>(a.batch * a.seq * a.kv_heads * a.head_dim) * e;
    Scratch q(backend, q_bytes), k(backend, kv_bytes), v(backend, kv_bytes), out(backend, q_bytes);
    Scratch dout(backend, q_bytes), dq(backend, q_bytes), dk(backend, kv_bytes), dv(backend, kv_bytes);
    Scratch probs(backend, a.fused ? 0 : static_cast<std::uint64_t>(a.batch * a.heads * a.seq * a.seq) * e);
    Scratch lse(backend, a.fused ? static_cast<std::uint64_t>(a.batch * a.heads * a.seq) * 4 : 0);
    const std::uint64_t ws_bytes = backend.attention_workspace_bytes(shape, kind, dt);
    Scratch ws(backend, ws_bytes);
    kernels::AttentionForwardArgs f;
    f.shape = shape, f.kind = kind, f.dtype = dt;
    f.q = q.ptr, f.k = k.ptr, f.v = v.ptr;
    f.q_stride = a.heads * a.head_dim, f.k_stride = f.v_stride = a.kv_heads * a.head_dim;
    f.out = out.ptr, f.out_stride = f.q_stride;
    f.probs = probs.ptr, f.lse = static_cast<float*>(lse.ptr);
    kernels::AttentionBackwardArgs bw;
    bw.shape = shape, bw.kind = kind, bw.dtype = dt;
    bw.q = q.ptr, bw.k = k.ptr, bw.v = v.ptr;
    bw.q_stride = f.q_stride, bw.k_stride = f.k_stride, bw.v_stride = f.v_stride;
    bw.probs = probs.ptr, bw.out = out.ptr, bw.lse = static_cast<const float*>(lse.ptr), bw.out_stride = f.q_stride;
    bw.dout = dout.ptr, bw.dout_stride = f.q_stride;
    bw.dq = dq.ptr, bw.dk = dk.ptr, bw.dv = dv.ptr;
    double spent_f = 0, spent_b = 0;
    a.forward_s = seconds_per_call(
        backend,
        [&] {
            backend.attention_forward(f, {ws.ptr, ws_bytes});
        },
        s, &spent_f);
    a.backward_s = seconds_per_call(
        backend,
        [&] {
            backend.attention_backward(bw, {ws.ptr, ws_bytes});
        },
        s, &spent_b);
    if (spent) *spent = spent_f + spent_b;
}

// The machine speed a probe set stands for: the median of a few readings of
// the speed reference, so one reading taken during a hiccup does not set it.
double speed_reference_now(kernels::Backend& backend) {
    std::vector<double> ms;
    for (int i = 0; i < 5; ++i) ms.push_back(1e3 * kernels::time_speed_reference(backend));
    return median_of(ms) / 1e3;
}

// At most three message sizes per rank count: the smallest, the largest and the one
// nearest their geometric mean, so a sweep over many shapes still probes quickly.
std::vector<std::uint64_t> probed_sizes(const std::set<std::uint64_t>& sizes) {
    std::vector<std::uint64_t> all(sizes.begin(), sizes.end());
    if (all.size() <= 3) return all;
    const double middle = std::sqrt(static_cast<double>(all.front()) * static_cast<double>(all.back()));
    const auto mid = std::min_element(all.begin() + 1, all.end() - 1, [&](std::uint64_t a, std::uint64_t b) {
        return std::fabs(std::log(static_cast<double>(a) / middle)) <
               std::fabs(std::log(static_cast<double>(b) / middle));
    });
    return {all.front(), *mid, all.back()};
}

void plan_collectives(const ModelSpec& model, const std::vector<TrialConfig>& configs, ProbedRates& plan) {
    std::map<std::pair<std::uint32_t, ProbeDtype>, std::set<std::uint64_t>> sizes;  // ranks, dtype -> message bytes
    // ZeRO's collectives run over the data-parallel replicas (core/parallel_plan.h); the
    // tensor-parallel group's at its own size, at the sizes its calls move (estimate/tensor_parallel_calls.h).
    for (const TrialConfig& c : configs) {
        if (parallel_plan(c).dp > 1)
            sizes[{parallel_plan(c).dp, probe_dtype(c.precision)}].insert(
                static_cast<std::uint64_t>(collective_message_bytes(model, c)));
        for (const TensorParallelCall& call : tensor_parallel_calls(model, c))
            sizes[{call.ranks, probe_dtype(c.precision)}].insert(static_cast<std::uint64_t>(call.bytes));
    }
    for (const auto& [key, bytes] : sizes) {
        const auto [ranks, dtype] = key;
        // One element per rank: the latency floor of every op (the scalar norm's
        // all-reduce, LOMO's small tensors), beside the layer buffers' sizes.
        std::vector<std::uint64_t> probed{std::uint64_t{probe_dtype_bytes(dtype)} * ranks};
        for (std::uint64_t b : probed_sizes(bytes))
            if (b > probed.front()) probed.push_back(b);
        for (std::uint64_t b : probed)
            for (Collective op : {Collective::all_reduce, Collective::reduce_scatter, Collective::all_gather})
                plan.collectives.push_back({op, ranks, b, 0, dtype});
    }
}

// Each gradient bucket a ZeRO-2/3 configuration fills (estimate/collective_calls.h), per
// rank count, dtype and size: the layers' and the outer buffer's (LoRA: the adapters'),
// and where the shard it adds into lives (the host's under offload).
void plan_buckets(const ModelSpec& model, const std::vector<TrialConfig>& configs, ProbedRates& plan) {
    std::set<std::tuple<std::uint32_t, ProbeDtype, std::uint64_t, bool>> buckets;
    for (const TrialConfig& c : configs) {
        const bool host = offload_plan(c.offload).on_host(Component::grads);
        for (const CollectiveCall& call : collective_calls(model, c))
            if (call.bucket)
                buckets.insert(
                    {parallel_plan(c).dp, probe_dtype(c.precision), static_cast<std::uint64_t>(call.bytes), host});
    }
    for (const auto& [ranks, dtype, bytes, host] : buckets) plan.buckets.push_back({dtype, ranks, bytes, 0, host});
}

// Offload's host-to-device copies, at one layer's parameter shard (the adapters' under LoRA) in the weights' dtype.
void plan_host_links(const ModelSpec& model, const std::vector<TrialConfig>& configs, ProbedRates& plan) {
    std::set<std::uint64_t> sizes;
    for (const TrialConfig& c : configs)
        if (c.offload != Offload::none) sizes.insert(static_cast<std::uint64_t>(offload_shard_bytes(model, c)));
    for (std::uint64_t bytes : sizes)
        if (bytes > 0) plan.host_links.push_back({bytes, 0});
}

// Each optimizer in each precision the sweep runs, over the tensors its step updates
// (8-bit Adam per block size; full fine-tuning and each adapter shape apart).
void plan_optimizers(const ModelSpec& model, const std::vector<TrialConfig>& configs, std::int64_t elements,
                     ProbedRates& plan) {
    for (const TrialConfig& c : configs) {
        OptimizerRate r{c.optimizer, c.precision, 256, optimizer_probe_tensors(model, c, elements), 0, false};
        if (c.optimizer == Optimizer::adam8bit) r.block = c.adam8bit_block;
        const bool seen = std::any_of(plan.optimizers.begin(), plan.optimizers.end(), [&](const OptimizerRate& o) {
            return o.optimizer == r.optimizer && o.precision == r.precision && o.block == r.block &&
                   o.tensors == r.tensors;
        });
        if (!seen) plan.optimizers.push_back(std::move(r));
    }
    // Offload updates on the host's cores whatever the device: its own probe, at the CPU's size.
    for (const TrialConfig& c : configs) {
        if (c.offload == Offload::none) continue;
        OptimizerRate r{.optimizer = c.optimizer,
                        .precision = c.precision,
                        .block = 256,
                        .tensors = optimizer_probe_tensors(model, c, kOptimizerProbeElements),
                        .seconds = 0,
                        .host = true};
        const bool seen = std::any_of(plan.optimizers.begin(), plan.optimizers.end(), [&](const OptimizerRate& o) {
            return o.host && o.optimizer == r.optimizer && o.precision == r.precision && o.tensors == r.tensors;
        });
        if (!seen) plan.optimizers.push_back(std::move(r));
    }
}

// Every distinct GEMM a micro-batch of c calls (estimate/gemm_calls.h): each
// linear's base and adapter calls and the LM head's, each with its pass and output.
void plan_gemms(const ModelSpec& model, const TrialConfig& c, bool widening_backend, ProbedRates& plan) {
    const auto t = static_cast<std::int64_t>(c.micro_batch) * c.context;
    const ProbeDtype dtype = probe_dtype(c.precision);
    const auto add = [&](const std::vector<GemmCall>& calls) {
        for (const GemmCall& g : calls) {
            const bool seen = std::any_of(plan.gemm.begin(), plan.gemm.end(), [&](const GemmRate& p) {
                return p.m == g.m && p.n == g.n && p.k == g.k && p.dtype == dtype && p.pass == g.pass &&
                       p.output == g.output;
            });
            if (!seen) plan.gemm.push_back({g.m, g.n, g.k, dtype, 0, g.pass, g.output});
        }
    };
    const auto add_all = [&](const LinearGemmCalls& calls) {
        add(calls.forward);
        add(calls.backward);
        add(calls.recompute);
    };
    for (const LinearGemmCalls& calls : layer_gemm_calls(model, c, t, widening_backend)) add_all(calls);
    add_all(head_gemm_calls(model, t, dtype != ProbeDtype::f32, c.adapters()));
}

}  // namespace

ProbedRates plan_probes(const ModelSpec& model, const std::vector<TrialConfig>& configs,
                        std::int64_t optimizer_elements, bool widening_backend) {
    std::set<std::tuple<std::int64_t, ProbeDtype>> tokens;  // (rows, dtype)
    // (batch, seq, dtype, flash): each attention implementation the sweep runs is probed.
    std::set<std::tuple<std::int64_t, std::int64_t, ProbeDtype, bool>> attention;
    ProbedRates plan;
    for (const TrialConfig& c : configs) {
        tokens.insert({static_cast<std::int64_t>(c.micro_batch) * c.context, probe_dtype(c.precision)});
        attention.insert({c.micro_batch, c.context, probe_dtype(c.precision), c.attention == Attention::flash});
        plan_gemms(model, c, widening_backend, plan);
    }
    const auto h = static_cast<std::int64_t>(model.hidden), kv = static_cast<std::int64_t>(model.kv_dim());
    const auto f = static_cast<std::int64_t>(model.ffn), v = static_cast<std::int64_t>(model.vocab);
    for (const auto& [b, s, dtype, flash] : attention)
        plan.attention.push_back({b, s, static_cast<std::int64_t>(model.heads),
                                  static_cast<std::int64_t>(model.kv_heads),
                                  static_cast<std::int64_t>(model.head_dim()), dtype, flash, 0, 0});
    for (const auto& [t, dtype] : tokens)
        plan.elementwise.push_back({t, dtype, h, kv, f, v, static_cast<std::int64_t>(model.heads),
                                    static_cast<std::int64_t>(model.kv_heads),
                                    static_cast<std::int64_t>(model.head_dim()), 0, 0, 0});
    plan.speed_reference_s = 1;  // asked for
    plan_optimizers(model, configs, optimizer_elements, plan);
    std::set<ProbeDtype> dequantized;  // qlora's compute dtypes
    for (const TrialConfig& c : configs)
        if (c.method == Method::qlora) dequantized.insert(probe_dtype(c.precision));
    for (ProbeDtype dtype : dequantized) plan.dequantize.push_back({dtype, h, kv, f, 0});
    plan_buckets(model, configs, plan);
    plan_host_links(model, configs, plan);
    plan_collectives(model, configs, plan);
    return plan;
}

ProbedRates run_probes(kernels::Backend& backend, const ProbedRates& plan, const ProbeSettings& settings,
                       std::vector<ProbeRecord>* records) {
    ProbedRates out = plan;
    out.collectives.clear();  // they need ranks: a CollectiveProber's
    const auto reference_start = std::chrono::steady_clock::now();
    out.speed_reference_s = speed_reference_now(backend);
    const double spent_reference =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - reference_start).count();
    std::vector<double> spent_gemm(out.gemm.size()), spent_attention(out.attention.size());
    for (std::size_t i = 0; i < out.gemm.size(); ++i)
        out.gemm[i].flops_per_s = probe_gemm(backend, out.gemm[i], settings, &spent_gemm[i]);
    // Every other op as a step runs it: after a GEMM (gemm_primer says why).
    ProbeSettings after_gemm = settings;
    after_gemm.before_each_call = gemm_primer(backend);
    for (std::size_t i = 0; i < out.attention.size(); ++i)
        probe_attention(backend, out.attention[i], after_gemm, &spent_attention[i]);
    std::vector<double> spent_elementwise(out.elementwise.size());
    for (std::size_t i = 0; i < out.elementwise.size(); ++i)
        probe_elementwise(backend, out.elementwise[i], after_gemm, &spent_elementwise[i]);
    std::vector<double> spent_optimizer(out.optimizers.size());
    // The host's update runs on the CPU backend with every core, as offload's does; on the CPU that is `backend`.
    std::unique_ptr<kernels::CpuBackend> host;
    for (std::size_t i = 0; i < out.optimizers.size(); ++i) {
        OptimizerRate& r = out.optimizers[i];
        if (r.host && backend.name() != "cpu" && !host) host = std::make_unique<kernels::CpuBackend>();
        kernels::Backend& where = r.host && host ? *host : backend;
        r.seconds = probe_optimizer(where, r, r.host && host ? settings : after_gemm, &spent_optimizer[i]);
    }
    std::vector<double> spent_bucket(out.buckets.size());
    for (std::size_t i = 0; i < out.buckets.size(); ++i)
        out.buckets[i].seconds = probe_bucket(backend, out.buckets[i], after_gemm, &spent_bucket[i]);
    std::vector<double> spent_host_link(out.host_links.size());
    for (std::size_t i = 0; i < out.host_links.size(); ++i)
        out.host_links[i].bytes_per_s = probe_host_link(backend, out.host_links[i], after_gemm, &spent_host_link[i]);
    std::vector<double> spent_dequantize(out.dequantize.size());
    for (std::size_t i = 0; i < out.dequantize.size(); ++i)
        out.dequantize[i].layer_s = probe_dequantize(backend, out.dequantize[i], after_gemm, &spent_dequantize[i]);
    if (const auto device = kernels::cuda_memory_stats(backend))  // after the GEMMs: their tuning scratch is known
        out.device_baseline_bytes =
            device->context_bytes + device->cublas_bytes + device->backend_bytes + device->gemm_tuning_bytes;
    if (records) {
        *records = records_of(out);
        // records_of lists gemm, then attention (forward, backward), element-wise (three
        // parts), the optimizers, the NF4 dequantizations, the gradient buckets, offload's host links, then the speed
        // reference (and a GPU's device baseline,
        // measured for free: its seconds stay 0).
        std::size_t r = 0;
        for (double s : spent_gemm) (*records)[r++].seconds = s;
        for (double s : spent_attention) {
            (*records)[r++].seconds = s / 2;
            (*records)[r++].seconds = s / 2;
        }
        for (double s : spent_elementwise)
            for (int part = 0; part < 3; ++part) (*records)[r++].seconds = s / 3;
        for (double s : spent_optimizer) (*records)[r++].seconds = s;
        for (double s : spent_dequantize) (*records)[r++].seconds = s;
        for (double s : spent_bucket) (*records)[r++].seconds = s;
        for (double s : spent_host_link) (*records)[r++].seconds = s;
        if (r < records->size() && plan.speed_reference_s > 0) (*records)[r].seconds = spent_reference;
    }
    return out;
}

}  // namespace tune::probe
