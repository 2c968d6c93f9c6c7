#include "estimate/frameworks/eager_ops.h"

#include "core/parallel_plan.h"
#include "estimate/collective_calls.h"
#include "estimate/recompute.h"

namespace tune {

EagerWidths eager_widths(const TrialConfig& c) {
    const ParallelPlan plan = parallel_plan(c);
    const ModelSpec m = plan.local(c.model);
    EagerWidths w;
    w.hidden = static_cast<double>(m.hidden) / (plan.sequence_parallel ? plan.tp : 1);
    w.q = static_cast<double>(m.q_dim());
    w.kv = static_cast<double>(m.kv_dim());
    w.ffn = static_cast<double>(m.ffn);
    w.vocab = static_cast<double>(m.vocab);
    w.grouped_kv = m.kv_heads < m.heads;
    return w;
}

double eager_seconds(const EagerTraffic& t, const TrialConfig& c, const Hardware& hw) {
    if (!(hw.hbm_bytes_per_s > 0)) return 0.0;
    // Forward, backward at twice its bytes, and the forward again where checkpointing reruns it.
    const double layer_passes = 3.0 + (recomputed(c.checkpointing).elementwise ? 1.0 : 0.0);
    const double per_token =
        static_cast<double>(c.model.layers) * t.layer_forward * layer_passes + 3.0 * t.outer_forward + t.loss_whole;
    const double tokens = static_cast<double>(c.micro_batch) * c.context;
    // LOMO's norm pass runs forward and backward twice (train/trainer.cpp lomo_step).
    const double bytes = (per_token * tokens + t.per_micro_batch) * c.grad_accum * lomo_backward_passes(c);
    return bytes / hw.hbm_bytes_per_s;
}

}  // namespace tune
