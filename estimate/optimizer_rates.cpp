// The optimizer probes' tensors and the lookup of their rates (estimate/probed_rates.h).
#include <algorithm>

#include "estimate/model_flops.h"
#include "estimate/probed_rates.h"

namespace tune {
namespace {

// Every layer's tensors in train/param_layout.cpp's order, then the outer buffer's.
std::vector<TensorShape> full_tensors(const ModelSpec& m) {
    const auto h = static_cast<std::int64_t>(m.hidden), kv = static_cast<std::int64_t>(m.kv_dim());
    const auto f = static_cast<std::int64_t>(m.ffn), v = static_cast<std::int64_t>(m.vocab);
    const std::vector<TensorShape> layer{{1, h}, {h, h}, {kv, h}, {kv, h}, {h, h}, {1, h}, {f, h}, {f, h}, {h, f}};
    std::vector<TensorShape> out;
    for (std::uint32_t i = 0; i < m.layers; ++i) out.insert(out.end(), layer.begin(), layer.end());
    out.insert(out.end(), {{v, h}, {1, h}, {v, h}});  // embedding, final norm, head
    return out;
}

// Every layer's adapters: A (r, in) then B (out, r) per targeted linear (estimate/flat_layout adapter_buffer).
std::vector<TensorShape> adapter_tensors(const ModelSpec& m, const TrialConfig& c) {
    std::vector<TensorShape> layer;
    for (const Linear& l : layer_linears(m, c))
        if (l.rank > 0) {
            const auto r = static_cast<std::int64_t>(l.rank);
            layer.push_back({r, static_cast<std::int64_t>(l.in)});
            layer.push_back({static_cast<std::int64_t>(l.out), r});
        }
    std::vector<TensorShape> out;
    for (std::uint32_t i = 0; i < m.layers; ++i) out.insert(out.end(), layer.begin(), layer.end());
    return out;
}

}  // namespace

std::vector<TensorShape> optimizer_probe_tensors(const ModelSpec& m, const TrialConfig& c, std::int64_t max_elements) {
    std::vector<TensorShape> out;
    std::int64_t total = 0;
    for (TensorShape t : c.adapters() ? adapter_tensors(m, c) : full_tensors(m)) {
        if (t.numel() <= 0) continue;
        if (total + t.numel() > max_elements) {  // the rows that fit; at least one of a first tensor
            t.rows = std::min(t.rows, (max_elements - total) / t.cols);
            if (t.rows < 1 && out.empty()) t.rows = 1;
            if (t.rows >= 1) out.push_back(t);
            break;
        }
        total += t.numel();
        out.push_back(t);
    }
    return out;
}

std::int64_t OptimizerRate::elements() const {
    std::int64_t n = 0;
    for (const TensorShape& t : tensors) n += t.numel();
    return n;
}

namespace {

// Seconds per element of the probe of c's optimizer and precision among `rates` on the host or not.
std::optional<double> seconds_per_element(const std::vector<OptimizerRate>& rates, const ModelSpec& m,
                                          const TrialConfig& c, bool host) {
    const OptimizerRate* best = nullptr;
    for (const OptimizerRate& r : rates) {
        if (r.host != host) continue;
        const bool block = c.optimizer != Optimizer::adam8bit || r.block == static_cast<std::int64_t>(c.adam8bit_block);
        const bool same =
            r.optimizer == c.optimizer && r.precision == c.precision && block && r.seconds > 0 && r.elements() > 0;
        if (!same) continue;
        // Cut at its own size, c's tensors are the probe's exactly when it probed them.
        if (r.tensors == optimizer_probe_tensors(m, c, r.elements()))
            return r.seconds / static_cast<double>(r.elements());
        if (best == nullptr) best = &r;
    }
    if (best == nullptr) return std::nullopt;
    return best->seconds / static_cast<double>(best->elements());
}

}  // namespace

std::optional<double> ProbedRates::optimizer_seconds_per_element(const ModelSpec& m, const TrialConfig& c) const {
    return seconds_per_element(optimizers, m, c, false);
}

std::optional<double> ProbedRates::host_optimizer_seconds_per_element(const ModelSpec& m, const TrialConfig& c) const {
    return seconds_per_element(optimizers, m, c, true);
}

}  // namespace tune
