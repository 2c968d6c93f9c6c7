#include "core/collapsed_values.h"

namespace tune {

std::optional<Collapse> collapsed(const TrialConfig& c) {
    // Selective checkpointing drops only the attention probabilities, which flash attention never
    // keeps (train/model.cpp, docs/memory-model.md §3): the same memory and the same work as none.
    if (c.checkpointing == Checkpointing::selective && c.attention == Attention::flash) {
        TrialConfig same = c;
        same.checkpointing = Checkpointing::none;
        return Collapse{same,
                        "with flash attention, selective checkpointing keeps and recomputes what none does "
                        "(flash attention holds no attention scores for it to drop)"};
    }
    return std::nullopt;
}

}  // namespace tune
