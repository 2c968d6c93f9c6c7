#include "exports/framework_checkpointing.h"

namespace tune {

FrameworkCheckpointing framework_checkpointing(const TrialConfig& c) {
    switch (c.checkpointing) {
        case Checkpointing::none:
            return {false, {}};
        case Checkpointing::full:
            return {true, {}};
        case Checkpointing::selective:
            if (c.attention == Attention::flash)
                return {false,
                        "selective checkpointing with flash attention keeps what no checkpointing keeps (flash "
                        "attention holds no scores to drop), so checkpointing stays off"};
            return {true,
                    "selective checkpointing (all but the attention scores): the framework checkpoints whole "
                    "layers, which keeps less and recomputes more than tune measured"};
    }
    return {false, {}};
}

}  // namespace tune
