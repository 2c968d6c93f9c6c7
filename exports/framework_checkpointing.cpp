#include "exports/framework_checkpointing.h"

namespace tune {

FrameworkCheckpointing framework_checkpointing(const TrialConfig& c) {
    switch (c.checkpointing) {
        case Checkpointing::none:
            return {false, false, {}};
        case Checkpointing::full:
            return {true, false, {}};
        case Checkpointing::selective_op:
            return {false, true, {}};
        case Checkpointing::selective:
            if (c.attention == Attention::flash)
                return {false, false,
                        "selective checkpointing with flash attention keeps what no checkpointing keeps (flash "
                        "attention holds no scores to drop), so checkpointing stays off"};
            return {true, false,
                    "selective checkpointing (all but the attention scores): the framework checkpoints whole "
                    "layers, which keeps less and recomputes more than tune measured"};
    }
    return {false, false, {}};
}

}  // namespace tune
