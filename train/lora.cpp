#include "train/lora.h"

#include <array>
#include <cmath>
#include <stdexcept>
#include <string>

#include "core/parallel_plan.h"
#include "core/peft_modules.h"
#include "kernels/math/neftune.h"

namespace tune::train {

namespace {

using kernels::DType;

// The layer's linears in core/peft_modules.h's kLlamaLinears order.
constexpr std::array<LayerTensor, kLlamaLinears.size()> kLinears{LayerTensor::q,   LayerTensor::k,    LayerTensor::v,
                                                                 LayerTensor::o,   LayerTensor::gate, LayerTensor::up,
                                                                 LayerTensor::down};

kernels::GemmArgs args(std::int64_t m, std::int64_t n, std::int64_t k, bool ta, bool tb, const void* a, const void* b,
                       void* c, float alpha, float beta, DType dt) {
    kernels::GemmArgs g;
    g.m = m, g.n = n, g.k = k, g.trans_a = ta, g.trans_b = tb;
    g.a = a, g.lda = ta ? m : k;
    g.b = b, g.ldb = tb ? k : n;
    g.c = c, g.ldc = n;
    g.alpha = alpha, g.beta = beta;
    g.a_dtype = g.b_dtype = g.c_dtype = dt;
    return g;
}

}  // namespace

std::size_t lora_targets(LoraTargets targets) { return lora_target_count(targets); }

std::optional<std::size_t> lora_slot(LayerTensor t, LoraTargets targets) {
    std::size_t j = 0;
    for (std::size_t i = 0; i < kLinears.size(); ++i) {
        if (!lora_adapts(targets, i)) continue;
        if (kLinears[i] == t) return j;
        ++j;
    }
    return std::nullopt;
}

ParamLayout make_adapter_layout(const ModelSpec& model, std::uint32_t rank, LoraTargets targets, std::uint32_t shards,
                                std::uint32_t adam8bit_block) {
    const ParamLayout base = make_param_layout(model, shards, adam8bit_block);
    const auto r = static_cast<std::int64_t>(rank);
    std::vector<TensorView> tensors;
    for (std::size_t i = 0; i < kLinears.size(); ++i) {
        if (!lora_adapts(targets, i)) continue;
        const TensorView& w = base.at(kLinears[i]);
        const std::string module = w.name.substr(0, w.name.size() - std::string(".weight").size());
        tensors.push_back({module + ".lora_A.weight", r, w.cols});
        tensors.push_back({module + ".lora_B.weight", w.rows, r});
    }
    ParamLayout p;
    p.alignment = base.alignment;
    p.layers = base.layers;
    p.layer = place_tensors(std::move(tensors), std::max<std::uint32_t>(1, shards), p.alignment);
    p.has_outer = false;
    p.outer_slot.fill(-1);
    p.model_layers = p.layers;
    return p;
}

LoraSpec make_lora_spec(const TrialConfig& c) {
    LoraSpec s;
    s.rank = c.lora_rank;
    s.scale = static_cast<float>(c.lora_scale());
    s.targets = c.lora_targets;
    s.layout = make_adapter_layout(parallel_plan(c).local(c.model), c.lora_rank, c.lora_targets,
                                   parallel_plan(c).zero_shards(), c.adam8bit_block);
    return s;
}

LoraSpec make_lora_spec(const TrialConfig& c, const ParamLayout& base) {
    LoraSpec s = make_lora_spec(c);
    // A pipeline stage's adapters: its layers', which draw as the whole model's do.
    ModelSpec mine = parallel_plan(c).local(c.model);
    mine.layers = static_cast<std::uint64_t>(base.layers);
    s.layout = make_adapter_layout(mine, c.lora_rank, c.lora_targets, parallel_plan(c).zero_shards(), c.adam8bit_block);
    s.layout.whole_layers = base.whole_layers;
    s.layout.model_layers = base.model_layers;
    return s;
}

LayerTensor adapted_tensor(LoraTargets targets, std::size_t t) {
    std::size_t j = 0;
    for (std::size_t l = 0; l < kLinears.size(); ++l) {
        if (!lora_adapts(targets, l)) continue;
        if (j == t / 2) return kLinears[l];
        ++j;
    }
    throw std::out_of_range("adapted_tensor: past the adapters");
}

LayoutSource adapter_parallel_source(const TrialConfig& c, const ParamLayout& local, ParallelRank at) {
    const ParamLayout whole = make_adapter_layout(c.model, c.lora_rank, c.lora_targets, 1, c.adam8bit_block);
    LayoutSource out(local.buffers());
    for (std::size_t i = 0; i < local.buffers(); ++i) {
        const std::vector<TensorView>& mine = local.flat(i).tensors;
        for (std::size_t t = 0; t < mine.size(); ++t) {
            const LayerTensor base = adapted_tensor(c.lora_targets, t);
            const ParallelSplit split = parallel_split(base);
            // A follows a row-parallel base's columns, B a column-parallel base's rows; the other is whole.
            const bool follows = t % 2 == 0 ? split == ParallelSplit::columns : split == ParallelSplit::rows;
            const std::uint32_t index = kv_tensor(base) ? at.kv_shard : at.rank;
            out[i].push_back(
                split_source(whole.flat(i).tensors[t], mine[t], follows ? split : ParallelSplit::none, index));
        }
    }
    return out;
}

std::vector<std::vector<float>> lora_init(const ParamLayout& layout, std::uint64_t seed, const LayoutSource* source) {
    std::vector<std::vector<float>> host;
    for (std::size_t i = 0; i < layout.buffers(); ++i) {
        const FlatLayout& f = layout.flat(i);
        std::vector<float> buf(static_cast<std::size_t>(f.padded), 0.0f);
        const std::uint64_t stream = math::splitmix64(seed ^ (0x4c6f5241ull + layout.whole_index(i)));  // "LoRA"
        for (std::size_t t = 0; t < f.tensors.size(); t += 2) {  // A; B stays zero
            const TensorView& a = f.tensors[t];
            const TensorSource s = source != nullptr ? (*source)[i][t] : TensorSource{a.offset, a.rows, a.cols};
            const float bound = 1.0f / std::sqrt(static_cast<float>(s.cols));  // the whole linear's fan-in
            for (std::int64_t e = 0; e < a.numel(); ++e) {
                const std::int64_t row = s.row_begin + e / a.cols, col = s.col_begin + e % a.cols;
                buf[static_cast<std::size_t>(a.offset + e)] =
                    bound * math::uniform_pm1(stream, static_cast<std::uint64_t>(s.offset + row * s.cols + col));
            }
        }
        host.push_back(std::move(buf));
    }
    return host;
}

void LoraLinear::project(const void* x, const void* a, void* xa) const {
    backend.gemm(args(T, r, in, false, true, x, a, xa, 1.0f, 0.0f, dt), ws);
}

void LoraLinear::forward(const void* x, const void* a, const void* b, void* xa, void* y) const {
    project(x, a, xa);
    backend.gemm(args(T, out, r, false, true, xa, b, y, scale, 1.0f, dt), ws);
}

void LoraLinear::backward_input(const void* dy, const void* b, const void* a, void* tmp, void* dx) const {
    backend.gemm(args(T, r, out, false, false, dy, b, tmp, 1.0f, 0.0f, dt), ws);
    backend.gemm(args(T, in, r, false, false, tmp, a, dx, scale, 1.0f, dt), ws);
}

void LoraLinear::grad_a(const void* tmp, const void* x, void* da, float beta) const {
    backend.gemm(args(r, in, T, true, false, tmp, x, da, scale, beta, dt), ws);
}

void LoraLinear::grad_b(const void* dy, const void* xa, void* db, float beta) const {
    backend.gemm(args(out, r, T, true, false, dy, xa, db, scale, beta, dt), ws);
}

}  // namespace tune::train
