#include "harness/optimizer_state.h"

namespace tune::harness {

namespace {

using kernels::DType;

std::int64_t stats_numel(const TensorView& t) { return t.matrix() ? t.rows + t.cols : t.numel(); }

}  // namespace

OptimizerHyper optimizer_hyper(const TrialConfig& c) {
    OptimizerHyper h;
    h.lr = static_cast<float>(c.lr);
    h.weight_decay = static_cast<float>(c.weight_decay);
    h.beta2 = c.optimizer == Optimizer::lion ? 0.99f : 0.999f;  // Chen et al. 2023; torch AdamW
    if (c.beta1) h.beta1 = static_cast<float>(*c.beta1);
    if (c.beta2) h.beta2 = static_cast<float>(*c.beta2);
    if (c.eps) h.eps = static_cast<float>(*c.eps);
    h.block = c.adam8bit_block;
    return h;
}

OptimizerState::OptimizerState(kernels::Backend& backend, Allocator& memory, const TrialConfig& config,
                               ModelState& model)
    : backend_(backend), model_(model), kind_(config.optimizer), hyper_(optimizer_hyper(config)) {
    const ParamLayout& layout = model.layout();
    const std::uint64_t sb = kernels::dtype_bytes(model.plan().state);
    auto state = [&](std::uint64_t bytes) { return memory.zeros(Component::optim, bytes); };
    for (std::size_t i = 0; i < layout.buffers(); ++i) {
        const FlatLayout& f = layout.flat(i);
        // The region this rank updates: the whole buffer at stage 0, its shard from stage 1.
        const auto region = static_cast<std::uint64_t>(config.zero_stage >= 1 ? f.shard : f.padded);
        std::int64_t small = 0, stats = 0;
        for (const TensorView& t : f.tensors) {
            small_offset_.push_back(small);
            stats_offset_.push_back(stats);
            if (t.small()) small += t.numel();
            stats += stats_numel(t);
        }
        switch (kind_) {
            case Optimizer::adamw:
                m_.push_back(state(sb * region));
                v_.push_back(state(sb * region));
                break;
            case Optimizer::lion: m_.push_back(state(sb * region)); break;
            case Optimizer::adam8bit: {
                const auto blocks = region / static_cast<std::uint64_t>(hyper_.block);
                m_.push_back(state(region));
                v_.push_back(state(region));
                absmax_m_.push_back(state(4 * blocks));
                absmax_v_.push_back(state(4 * blocks));
                small_m_.push_back(state(sb * static_cast<std::uint64_t>(small)));
                small_v_.push_back(state(sb * static_cast<std::uint64_t>(small)));
                break;
            }
            case Optimizer::adafactor: stats_.push_back(state(sb * static_cast<std::uint64_t>(stats))); break;
            case Optimizer::lomo: break;
        }
    }
}

void* OptimizerState::state_at(const Buffer& b, std::int64_t element, std::uint64_t element_bytes) const {
    return b.at(static_cast<std::uint64_t>(element) * element_bytes);
}

kernels::ParamTensor OptimizerState::param_tensor(std::size_t buffer, std::size_t tensor, const void* grad,
                                                  float grad_scale) const {
    const TensorView& t = model_.layout().flat(buffer).tensors[tensor];
    const PrecisionPlan& plan = model_.plan();
    kernels::ParamTensor p;
    p.n = t.numel();
    p.grad = grad;
    p.grad_dtype = plan.weights;
    p.grad_scale = grad_scale;
    p.decay = t.matrix();
    if (plan.master) {
        p.param = static_cast<float*>(model_.master(buffer)) + t.offset;
        p.param_dtype = DType::f32;
        p.param_copy = model_.weight_tensor(buffer, tensor);
        p.copy_dtype = plan.weights;
    } else {
        p.param = model_.weight_tensor(buffer, tensor);
        p.param_dtype = plan.weights;
    }
    return p;
}

void OptimizerState::update(std::size_t buffer, std::size_t tensor, const kernels::ParamTensor& p,
                            std::int64_t step) {
    const TensorView& t = model_.layout().flat(buffer).tensors[tensor];
    const DType sd = model_.plan().state;
    const std::uint64_t sb = kernels::dtype_bytes(sd);
    const std::size_t slot = buffer * model_.layout().flat(0).tensors.size() + tensor;
    const kernels::AdamWParams adam{hyper_.lr, hyper_.beta1, hyper_.beta2, hyper_.eps, hyper_.weight_decay, step};
    switch (kind_) {
        case Optimizer::adamw:
            backend_.adamw_update(p, state_at(m_[buffer], t.offset, sb), state_at(v_[buffer], t.offset, sb), sd, adam);
            break;
        case Optimizer::lion:
            backend_.lion_update(p, state_at(m_[buffer], t.offset, sb), sd,
                                 {hyper_.lr, hyper_.beta1, hyper_.beta2, hyper_.weight_decay});
            break;
        case Optimizer::adam8bit:
            if (t.small()) {
                backend_.adamw_update(p, state_at(small_m_[buffer], small_offset_[slot], sb),
                                      state_at(small_v_[buffer], small_offset_[slot], sb), sd, adam);
            } else {
                const std::int64_t block = t.offset / hyper_.block;  // slots start on block boundaries
                backend_.adam8bit_update(p, m_[buffer].as<std::uint8_t>() + t.offset,
                                         v_[buffer].as<std::uint8_t>() + t.offset,
                                         absmax_m_[buffer].as<float>() + block, absmax_v_[buffer].as<float>() + block,
                                         {adam, hyper_.block});
            }
            break;
        case Optimizer::adafactor: {
            kernels::AdafactorParams af;
            af.weight_decay = hyper_.weight_decay;
            af.step = step;
            void* row = state_at(stats_[buffer], stats_offset_[slot], sb);
            void* col = t.matrix() ? state_at(stats_[buffer], stats_offset_[slot] + t.rows, sb) : nullptr;
            backend_.adafactor_update(p, t.matrix() ? t.rows : 1, t.cols, row, col, sd, af);
            break;
        }
        case Optimizer::lomo: backend_.sgd_update(p, {hyper_.lr, hyper_.weight_decay}); break;
    }
}

void OptimizerState::step(float grad_scale, std::int64_t step) {
    const ParamLayout& layout = model_.layout();
    for (std::size_t i = 0; i < layout.buffers(); ++i)
        for (std::size_t t = 0; t < layout.flat(i).tensors.size(); ++t)
            update(i, t, param_tensor(i, t, model_.grad_tensor(i, t), grad_scale), step);
}

void OptimizerState::apply_sgd(std::size_t buffer, std::size_t tensor, const void* grad, float grad_scale) {
    update(buffer, tensor, param_tensor(buffer, tensor, grad, grad_scale), 1);
}

}  // namespace tune::harness
