// The loss over the whole vocabulary as torchtitan and transformers under
// Trainer run it: cross_entropy on the upcast logits, the 16-bit logits dropped
// before backward.
//   torchtitan: components/loss.py cross_entropy_loss runs F.cross_entropy(pred.float(), ...),
//     and train.py train_step deletes pred before backward.
//   transformers: loss/loss_utils.py ForCausalLMLoss upcasts the logits; Trainer.compute_loss
//     returns the loss alone, so the outputs holding the logits go before accelerator.backward.
//     Under accelerate's native AMP (Accelerator.prepare_model, not DeepSpeed) the forward's
//     outputs pass through convert_outputs_to_fp32, an fp32 copy of the logits that takes the
//     upcast's freed block and goes with the outputs.
// The forward ends with the 16-bit logits, an fp32 copy and the log-softmax's fp32 output (s + 8
// bytes a logit); the backward holds that output, its gradient and the input's (12 bytes).
#include <fmt/format.h>

#include "estimate/frameworks/framework_profile.h"

namespace tune {

FrameworkTerm full_vocab_loss_term(const TrialConfig& c, std::uint64_t vocab, const StepMemory& engine) {
    const std::uint64_t tokens = std::uint64_t{c.micro_batch} * c.context;
    FrameworkTerm head{fmt::format("full-vocabulary fp32 log-softmax and its gradients ({} x {})", tokens, vocab),
                       static_cast<std::int64_t>(12 * tokens * vocab) -
                           static_cast<std::int64_t>(engine.at(Phase::head_backward)[Component::logits]),
                       {}};
    head.alive[static_cast<std::size_t>(Phase::head_backward)] = true;
    return head;
}

// PyTorch's caching allocator keeps a freed block reserved for later requests it
// fits. The freed fp32 copy's block takes cross_entropy's first fp32 gradient, and
// log_softmax's backward then asks for a second, which the freed 16-bit logits'
// block cannot hold: a new segment is reserved beside the idle one. With fp32
// logits .float() is the tensor itself and no block idles.
std::vector<FrameworkTerm> full_vocab_loss_cached_terms(const TrialConfig& c, std::uint64_t vocab) {
    const std::uint64_t s = weight_bytes(c.precision);
    if (s >= 4) return {};
    const std::uint64_t tokens = std::uint64_t{c.micro_batch} * c.context;
    FrameworkTerm idle{fmt::format("the freed 16-bit logits' block ({} x {}), too small for the fp32 gradient, "
                                   "reserved beside it",
                                   tokens, vocab),
                       static_cast<std::int64_t>(s * tokens * vocab),
                       {}};
    idle.alive[static_cast<std::size_t>(Phase::head_backward)] = true;
    return {idle};
}

}  // namespace tune
