// What a framework runs for tune's activation checkpointing. DeepSpeed, FSDP
// and transformers' gradient_checkpointing_enable (modeling_utils.py) each
// checkpoint whole decoder layers or nothing; tune's selective mode keeps all
// but the attention scores, which flash attention never keeps. selective-op is
// torchtitan's op policy, which only torchtitan runs (framework_problem).
#pragma once

#include <string>

#include "core/config.h"

namespace tune {

struct FrameworkCheckpointing {
    bool whole_layers = false;  // the framework's checkpointing switched on
    bool by_op = false;         // torchtitan's op-level selective checkpointing instead
    std::string note;           // why this differs from the name tune uses, when it does; else empty
};

FrameworkCheckpointing framework_checkpointing(const TrialConfig& c);

}  // namespace tune
