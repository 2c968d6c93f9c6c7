// What LitGPT (its own GPT model, fused qkv, finetune/lora.py) holds beyond our engine.
#include "search/frameworks/framework_profile.h"

namespace tune {

std::vector<FrameworkTerm> litgpt_terms(const TrialConfig& c) {
    std::vector<FrameworkTerm> terms;
    // Under FSDP, finetune/lora.py loads the checkpoint as a full state dict on
    // every rank (Lightning's FSDPStrategy, state_dict_type "full"), and the
    // reported torch.cuda.max_memory_allocated() is never reset: the whole
    // unsharded model counts beside the rank's shard.
    if (c.zero_stage == 3 && c.world_size > 1)
        terms.push_back({"the unsharded model of the full-state-dict load, beside the shard",
                         static_cast<std::int64_t>(c.model.param_count() * weight_bytes(c.precision)), kWholeStep});
    return terms;
}

}  // namespace tune
