#include "probe/optimizer_probe.h"

#include <memory>
#include <vector>

#include "core/replayed_update.h"
#include "estimate/flat_layout.h"
#include "probe/probe_timing.h"

namespace tune::probe {
namespace {

using kernels::DType;

// train/model_state.cpp precision_plan: the weights' (and gradients') dtype, the
// states', and fp32 master weights beside 16-bit ones in the mixed precisions.
struct Dtypes {
    DType weights = DType::f32, state = DType::f32;
    bool master = false;
};
Dtypes dtypes_of(Precision p) {
    return {kernel_dtype(probe_dtype(p)), state_bytes(p) == 4 ? DType::f32 : DType::bf16, has_master_weights(p)};
}

// Tensors at offsets aligned as the flat buffers' slots (8-bit blocks start on them).
struct Placement {
    std::vector<std::int64_t> offset;  // per tensor
    std::int64_t numel = 0;            // the buffer, padding included
    std::int64_t stats = 0;            // Adafactor: rows + cols per matrix, numel per vector
};
Placement place(const OptimizerRate& r) {
    const auto align = static_cast<std::int64_t>(flat_alignment(static_cast<std::uint32_t>(r.block)));
    Placement p;
    for (const TensorShape& t : r.tensors) {
        p.offset.push_back(p.numel);
        p.numel += static_cast<std::int64_t>(round_up(static_cast<std::uint64_t>(t.numel()), align));
        p.stats += t.rows > 1 ? t.rows + t.cols : t.numel();
    }
    return p;
}

// The buffers of one pass: weights (and master), gradients, the optimizer's states.
struct Buffers {
    Buffers(kernels::Backend& b, const OptimizerRate& r, const Dtypes& d, const Placement& p)
        : n(static_cast<std::uint64_t>(p.numel)),
          wb(kernels::dtype_bytes(d.weights)),
          sb(kernels::dtype_bytes(d.state)),
          weights(b, n * wb),
          master(b, d.master ? 4 * n : 0),
          grads(b, n * wb),
          // AdamW, 8-bit Adam's small tensors: m, v; Lion: m; 8-bit codes beside; Adafactor: statistics.
          m(b, r.optimizer == Optimizer::adamw || r.optimizer == Optimizer::lion || r.optimizer == Optimizer::adam8bit
                   ? n * sb
                   : 0),
          v(b, r.optimizer == Optimizer::adamw || r.optimizer == Optimizer::adam8bit ? n * sb : 0),
          codes(b, r.optimizer == Optimizer::adam8bit ? 2 * n : 0),
          absmax(b, r.optimizer == Optimizer::adam8bit ? 2 * 4 * (n / static_cast<std::uint64_t>(r.block) + 1) : 0),
          stats(b, r.optimizer == Optimizer::adafactor ? static_cast<std::uint64_t>(p.stats) * sb : 0),
          norm(b, 4) {
        // Values as training has them, not zeros: 8-bit Adam's quantization searches its code
        // book per element and Lion branches on each sign; on zeros every branch is predicted
        // and they ran 4-6x faster than on these values.
        const auto elements = static_cast<std::int64_t>(n);
        b.neftune_noise(grads.ptr, elements, 1e-3f, 1, d.weights);
        b.neftune_noise(weights.ptr, elements, 2e-2f, 2, d.weights);
        if (d.master) b.neftune_noise(master.ptr, elements, 2e-2f, 2, DType::f32);
    }
    std::uint64_t n, wb, sb;
    Scratch weights, master, grads, m, v, codes, absmax, stats, norm;
};

unsigned char* at(const Scratch& s, std::int64_t element, std::uint64_t bytes) {
    return static_cast<unsigned char*>(s.ptr) + static_cast<std::uint64_t>(element) * bytes;
}

// n elements from `offset` of the buffers, as train/optimizer_state.cpp OptimizerState::param_tensor makes them.
kernels::ParamTensor param_at(const Dtypes& d, const Buffers& b, std::int64_t offset, std::int64_t n, bool decay) {
    kernels::ParamTensor p;
    p.n = n;
    p.decay = decay;
    p.grad = at(b.grads, offset, b.wb);
    p.grad_dtype = d.weights;
    if (d.master) {
        p.param = at(b.master, offset, 4), p.param_dtype = DType::f32;
        p.param_copy = at(b.weights, offset, b.wb), p.copy_dtype = d.weights;
    } else {
        p.param = at(b.weights, offset, b.wb), p.param_dtype = d.weights;
    }
    return p;
}

// AdamW and Lion: the whole buffer in one call, its vectors undecayed, as
// OptimizerState::update_buffer makes it.
void update_buffer(kernels::Backend& backend, const OptimizerRate& r, const Dtypes& d, const Buffers& b,
                   const Placement& placement, const kernels::AdamWParams& adam) {
    std::vector<kernels::ElementRange> undecayed;
    for (std::size_t i = 0; i < r.tensors.size(); ++i)
        if (r.tensors[i].rows <= 1)
            undecayed.push_back({placement.offset[i], placement.offset[i] + r.tensors[i].numel()});
    kernels::ParamTensor p = param_at(d, b, 0, placement.numel, true);
    p.undecayed = undecayed.data(), p.undecayed_count = static_cast<std::int64_t>(undecayed.size());
    if (r.optimizer == Optimizer::adamw)
        backend.adamw_update(p, b.m.ptr, b.v.ptr, d.state, adam);
    else
        backend.lion_update(p, b.m.ptr, d.state, kernels::LionParams{});
}

// One tensor's call, as train/optimizer_state.cpp OptimizerState::update makes it.
void update(kernels::Backend& backend, const OptimizerRate& r, const Dtypes& d, Buffers& b, const TensorShape& t,
            std::int64_t offset, std::int64_t& stats, const kernels::AdamWParams& adam) {
    const kernels::ParamTensor p = param_at(d, b, offset, t.numel(), t.rows > 1);
    void* m = at(b.m, offset, b.sb);
    void* v = at(b.v, offset, b.sb);
    switch (r.optimizer) {
        case Optimizer::adamw:
        case Optimizer::lion:
            break;  // a buffer per call: update_buffer
        case Optimizer::adam8bit:
            if (p.n < static_cast<std::int64_t>(kSmallTensorElements)) {  // full-width state
                backend.adamw_update(p, m, v, d.state, adam);
            } else {
                // m's codes and absmax first, v's after them (pieces start on block boundaries).
                auto* absmax = static_cast<float*>(b.absmax.ptr);
                const auto n = static_cast<std::int64_t>(b.n);
                const std::int64_t block = offset / r.block, blocks = n / r.block + 1;
                backend.adam8bit_update(p, at(b.codes, offset, 1), at(b.codes, n + offset, 1), absmax + block,
                                        absmax + blocks + block, {adam, r.block});
            }
            break;
        case Optimizer::adafactor: {
            kernels::AdafactorParams af;
            af.step = adam.step;
            const bool matrix = t.rows > 1;
            backend.adafactor_update(p, matrix ? t.rows : 1, matrix ? t.cols : t.numel(), at(b.stats, stats, b.sb),
                                     matrix ? at(b.stats, stats + t.rows, b.sb) : nullptr, d.state, af);
            stats += matrix ? t.rows + t.cols : t.numel();
            break;
        }
        case Optimizer::lomo:
            backend.sgd_update(p, kernels::SgdParams{});
            break;
    }
}

}  // namespace

double probe_optimizer(kernels::Backend& backend, const OptimizerRate& r, const ProbeSettings& s, double* spent) {
    const Dtypes d = dtypes_of(r.precision);
    const Placement placement = place(r);
    Buffers b(backend, r, d, placement);
    const bool replays = update_replays(r.optimizer);
    // A replayed update reads its step on the device (train/trainer.cpp update_on_device); the probe's stays 1.
    Scratch device_step(backend, replays ? sizeof(std::int32_t) : 0);
    kernels::AdamWParams adam{1e-4f, 0.9f, 0.999f, 1e-8f, 0.0f, 0};
    if (replays) {
        const std::int32_t first = 1;
        backend.copy_to_device(device_step.ptr, &first, sizeof first);
        adam.device_step = static_cast<const std::int32_t*>(device_step.ptr);
    }
    const auto step = [&] {
        // The clipping norm's sum of squares over the gradients first (train/trainer.cpp
        // optimizer_step); LOMO finds it in its own backward pass instead.
        if (r.optimizer != Optimizer::lomo)
            backend.sum_squares(static_cast<float*>(b.norm.ptr), b.grads.ptr, placement.numel, d.weights);
        std::int64_t stats = 0;
        ++adam.step;
        if (r.optimizer == Optimizer::adamw || r.optimizer == Optimizer::lion)
            update_buffer(backend, r, d, b, placement, adam);
        else
            for (std::size_t i = 0; i < r.tensors.size(); ++i)
                update(backend, r, d, b, r.tensors[i], placement.offset[i], stats, adam);
    };
    if (!replays) return seconds_per_call(backend, step, s, spent);
    // As the trainer runs it: the norm's and the update's launches as graphs (one here), each a launch a step.
    const std::unique_ptr<kernels::OpGraph> graph = backend.record(step);
    return seconds_per_call(
        backend, [&] { graph->replay(); }, s, spent);
}

}  // namespace tune::probe
