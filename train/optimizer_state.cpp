#include "train/optimizer_state.h"

#include "core/replayed_update.h"

#include <algorithm>
#include <stdexcept>

namespace tune::train {

namespace {

using kernels::DType;

std::int64_t stats_numel(const TensorView& t) { return t.matrix() ? t.rows + t.cols : t.numel(); }

}  // namespace

OptimizerHyper optimizer_hyper(const TrialConfig& c) {
    const OptimizerHyperparameters d = optimizer_hyperparameters(c);
    OptimizerHyper h;
    h.lr = static_cast<float>(d.lr);
    h.weight_decay = static_cast<float>(d.weight_decay);
    h.beta1 = static_cast<float>(d.beta1);
    h.beta2 = static_cast<float>(d.beta2);
    h.eps = static_cast<float>(d.eps);
    h.block = d.block;
    return h;
}

OptimizerState::OptimizerState(kernels::Backend& backend, Allocator& memory, Comm& comm, const TrialConfig& config,
                               ModelState& model)
    : backend_(model.backend_of(Component::optim)),
      device_(backend),
      memory_(model.host().holds(Component::optim) ? *model.host().memory : memory),
      comm_(comm),
      model_(model),
      weights_apart_(model.host().holds(Component::optim) && !model.host().holds(Component::params) &&
                     model.plan().master),
      kind_(config.optimizer),
      hyper_(optimizer_hyper(config)),
      sharded_(model.zero().updates_own_shard_only() && comm.world_size() > 1) {
    const ParamLayout& layout = model.layout();
    const std::uint64_t sb = kernels::dtype_bytes(model.plan().state);
    auto state = [&](std::uint64_t bytes) { return memory_.zeros(Component::optim, bytes); };
    for (std::size_t i = 0; i < layout.buffers(); ++i) {
        const FlatLayout& f = layout.flat(i);
        // The region this rank updates: the whole buffer at stage 0, its shard from stage 1.
        const auto region = static_cast<std::uint64_t>(model.owned_length(i));
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
            case Optimizer::lion:
                m_.push_back(state(sb * region));
                break;
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
            case Optimizer::adafactor:
                stats_.push_back(state(sb * static_cast<std::uint64_t>(stats)));
                break;
            case Optimizer::lomo:
                break;
        }
    }
}

void* OptimizerState::state_at(const Buffer& b, std::int64_t element, std::uint64_t element_bytes) const {
    return b.at(static_cast<std::uint64_t>(element) * element_bytes);
}

std::size_t OptimizerState::slot(std::size_t buffer, std::size_t tensor) const {
    return buffer * model_.layout().flat(0).tensors.size() + tensor;
}

OptimizerState::Piece OptimizerState::piece(std::size_t buffer, std::size_t tensor) const {
    const TensorView& t = model_.layout().flat(buffer).tensors[tensor];
    const std::int64_t lo = model_.owned_begin(buffer), hi = lo + model_.owned_length(buffer);
    const std::int64_t first = std::max(t.offset, lo), last = std::min(t.offset + t.numel(), hi);
    if (last <= first) return Piece{0, 0, lo, 0};
    return Piece{first - t.offset, last - first, first, first - lo};
}

kernels::ParamTensor OptimizerState::param_tensor(std::size_t buffer, std::size_t tensor, const Piece& piece,
                                                  const void* grad, GradScale scale) const {
    const PrecisionPlan& plan = model_.plan();
    kernels::ParamTensor p;
    p.n = piece.n;
    p.decay = model_.layout().flat(buffer).tensors[tensor].matrix();
    p.grad = grad;
    p.grad_dtype = plan.weights;
    p.grad_scale = scale.factor;
    p.grad_multiplier = scale.multiplier;
    if (plan.master) {
        p.param = model_.master_at(buffer, piece.element);
        p.param_dtype = DType::f32;
        p.param_copy = weights_apart_ ? nullptr : model_.weight_at(buffer, piece.element);
        p.copy_dtype = plan.weights;
    } else {
        p.param = model_.weight_at(buffer, piece.element);
        p.param_dtype = plan.weights;
    }
    return p;
}

kernels::AdafactorParams OptimizerState::adafactor_params(std::int64_t step) const {
    kernels::AdafactorParams af;
    af.weight_decay = hyper_.weight_decay;
    af.step = step;
    return af;
}

kernels::AdafactorPiece OptimizerState::adafactor_piece(std::size_t buffer, std::size_t tensor, const Piece& piece,
                                                        const kernels::ParamTensor& p) const {
    const TensorView& t = model_.layout().flat(buffer).tensors[tensor];
    const DType sd = model_.plan().state;
    const std::uint64_t sb = kernels::dtype_bytes(sd);
    const std::int64_t stats = stats_offset_[slot(buffer, tensor)];
    kernels::AdafactorPiece a;
    a.p = p;
    a.begin = piece.begin;
    a.rows = t.matrix() ? t.rows : 1;
    a.cols = t.matrix() ? t.cols : t.numel();
    a.row_stat = state_at(stats_[buffer], t.matrix() ? stats : stats + piece.begin, sb);
    a.col_stat = t.matrix() ? state_at(stats_[buffer], stats + t.rows, sb) : nullptr;
    a.state = sd;
    return a;
}

void OptimizerState::update(std::size_t buffer, std::size_t tensor, const Piece& piece, const kernels::ParamTensor& p,
                            StepCount step) {
    const TensorView& t = model_.layout().flat(buffer).tensors[tensor];
    const DType sd = model_.plan().state;
    const std::uint64_t sb = kernels::dtype_bytes(sd);
    const kernels::AdamWParams adam{hyper_.lr,           hyper_.beta1, hyper_.beta2, hyper_.eps,
                                    hyper_.weight_decay, step.value,   step.device};
    switch (kind_) {
        case Optimizer::adamw:
            backend_.adamw_update(p, state_at(m_[buffer], piece.region, sb), state_at(v_[buffer], piece.region, sb), sd,
                                  adam);
            break;
        case Optimizer::lion:
            backend_.lion_update(p, state_at(m_[buffer], piece.region, sb), sd,
                                 {hyper_.lr, hyper_.beta1, hyper_.beta2, hyper_.weight_decay});
            break;
        case Optimizer::adam8bit:
            if (t.small()) {  // full-width state, replicated: the piece's part of it
                const std::int64_t at = small_offset_[slot(buffer, tensor)] + piece.begin;
                backend_.adamw_update(p, state_at(small_m_[buffer], at, sb), state_at(small_v_[buffer], at, sb), sd,
                                      adam);
            } else {
                const std::int64_t block = piece.region / hyper_.block;  // pieces start on block boundaries
                backend_.adam8bit_update(
                    p, m_[buffer].as<std::uint8_t>() + piece.region, v_[buffer].as<std::uint8_t>() + piece.region,
                    absmax_m_[buffer].as<float>() + block, absmax_v_[buffer].as<float>() + block, {adam, hyper_.block});
            }
            break;
        case Optimizer::adafactor: {
            const kernels::AdafactorPiece a = adafactor_piece(buffer, tensor, piece, p);
            backend_.adafactor_update(p, a.rows, a.cols, a.row_stat, a.col_stat, sd, adafactor_params(step.value));
            break;
        }
        case Optimizer::lomo:
            backend_.sgd_update(p, {hyper_.lr, hyper_.weight_decay});
            break;
    }
}

// §2: the statistics are replicated, so every rank runs every tensor's
// statistics pass; the partial sums of the owned pieces are completed by
// one all-reduce, the update's square sums by a second.
void OptimizerState::adafactor_sharded(std::size_t buffer, GradScale scale, std::int64_t step) {
    const FlatLayout& f = model_.layout().flat(buffer);
    const std::size_t tensors = f.tensors.size();
    // fp32 scratch (tag comm): param_sq (tensors), row and column sums of
    // every matrix, then update_sq (tensors) and row_mean (tensors).
    std::vector<std::int64_t> sums_at(tensors);
    std::int64_t first = static_cast<std::int64_t>(tensors);
    for (std::size_t k = 0; k < tensors; ++k) {
        sums_at[k] = first;
        if (f.tensors[k].matrix()) first += f.tensors[k].rows + f.tensors[k].cols;
    }
    const std::int64_t update_sq = first, row_mean = first + static_cast<std::int64_t>(tensors);
    Buffer scratch = memory_.zeros(Component::comm, static_cast<std::uint64_t>(row_mean + tensors) * 4);
    float* s = scratch.as<float>();
    const kernels::AdafactorParams hp = adafactor_params(step);
    std::vector<kernels::AdafactorPiece> pieces;
    for (std::size_t k = 0; k < tensors; ++k) {
        const Piece pc = piece(buffer, k);
        const kernels::ParamTensor p = param_tensor(buffer, k, pc, model_.grad_at(buffer, pc.element), scale);
        pieces.push_back(adafactor_piece(buffer, k, pc, p));
        const std::int64_t rows = pieces.back().factored() ? pieces.back().rows : 0;
        backend_.adafactor_partial_sums(pieces.back(), s + k, s + sums_at[k], s + sums_at[k] + rows, hp);
    }
    comm_.all_reduce(s, update_sq, DType::f32, ReduceOp::sum);
    for (std::size_t k = 0; k < tensors; ++k) {
        const std::int64_t rows = pieces[k].factored() ? pieces[k].rows : 0;
        backend_.adafactor_statistics(pieces[k], s + sums_at[k], s + sums_at[k] + rows, s + row_mean + k,
                                      s + update_sq + k, hp);
    }
    comm_.all_reduce(s + update_sq, static_cast<std::int64_t>(tensors), DType::f32, ReduceOp::sum);
    for (std::size_t k = 0; k < tensors; ++k)
        if (pieces[k].p.n > 0) backend_.adafactor_apply(pieces[k], s + k, s + row_mean + k, s + update_sq + k, hp);
}

// Padding between tensors and past the last is zero in parameters, gradients
// and states, and an update of zeros leaves zeros: the call may run over it.
void OptimizerState::update_buffer(std::size_t buffer, GradScale scale, StepCount step) {
    const std::int64_t lo = model_.owned_begin(buffer), n = model_.owned_length(buffer);
    if (n == 0) return;
    std::vector<kernels::ElementRange> undecayed;  // in order: place_tensors lays tensors out by offset
    for (const TensorView& t : model_.layout().flat(buffer).tensors) {
        const std::int64_t b = std::max(t.offset, lo) - lo, e = std::min(t.offset + t.numel(), lo + n) - lo;
        if (!t.matrix() && e > b) undecayed.push_back({b, e});
    }
    const Piece whole{0, n, lo, 0};
    kernels::ParamTensor p = param_tensor(buffer, 0, whole, model_.grad_at(buffer, lo), scale);
    p.decay = true;
    p.undecayed = undecayed.data(), p.undecayed_count = static_cast<std::int64_t>(undecayed.size());
    update(buffer, 0, whole, p, step);
}

bool OptimizerState::replayable() const { return update_replays(kind_) && &backend_ == &device_; }

void OptimizerState::step(GradScale scale, StepCount step) {
    if (step.device != nullptr && !replayable())
        throw std::logic_error("OptimizerState::step: Adafactor, LOMO and host updates take their step from the host");
    const ParamLayout& layout = model_.layout();
    for (std::size_t i = 0; i < layout.buffers(); ++i) {
        if (kind_ == Optimizer::adafactor && sharded_) {
            adafactor_sharded(i, scale, step.value);
            continue;
        }
        if (kind_ == Optimizer::adamw || kind_ == Optimizer::lion) {
            update_buffer(i, scale, step);
        } else {
            for (std::size_t t = 0; t < layout.flat(i).tensors.size(); ++t) {
                const Piece pc = piece(i, t);
                if (pc.n > 0) update(i, t, pc, param_tensor(i, t, pc, model_.grad_at(i, pc.element), scale), step);
            }
        }
        if (weights_apart_) {  // the owned region whole: padding is zero in both
            const std::int64_t first = model_.owned_begin(i);
            device_.cast(model_.weight_at(i, first), model_.plan().weights, model_.master_at(i, first), DType::f32,
                         model_.owned_length(i));
        }
    }
}

void OptimizerState::apply_sgd(std::size_t buffer, std::size_t tensor, const void* grad, float grad_scale) {
    const Piece pc = piece(buffer, tensor);
    if (pc.n == 0) return;
    const void* mine = static_cast<const unsigned char*>(grad) +
                       static_cast<std::uint64_t>(pc.begin) * kernels::dtype_bytes(model_.plan().weights);
    update(buffer, tensor, pc, param_tensor(buffer, tensor, pc, mine, {grad_scale, nullptr}), {});
}

}  // namespace tune::train
