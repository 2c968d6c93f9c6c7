// What an offload setting means, named once. The trainer places its buffers
// and the estimator splits its ledgers by asking this plan which components
// live in host memory; validity (core/validity.cpp) says where a setting runs.
//
//   none              every state on the device
//   optimizer         the fp32 master, the optimizer states and the rank's
//                       gradient shard on the host, where the update runs;
//                       gradient buckets stream there as backward makes them
//                       (ZeRO-2 semantics even on one rank, as DeepSpeed's
//                       ZeRO-Offload: stage_1_and_2.py, cpu_offload)
//   optimizer+params  also the 16-bit parameter shards (ZeRO-3 only), each
//                       gathered to the device before its use (stage3.py,
//                       offload_param)
#pragma once

#include "core/config.h"
#include "core/memory_components.h"

namespace tune {

struct OffloadPlan {
    bool optimizer_on_host = false;  // master, optimizer states, gradient shard
    bool params_on_host = false;     // the parameter shards too

    constexpr bool any() const { return optimizer_on_host; }
    // Whether a persistent buffer of this component lives in host memory.
    constexpr bool on_host(Component c) const {
        switch (c) {
            case Component::master:
            case Component::optim:
            case Component::grads:
                return optimizer_on_host;
            case Component::params:
                return params_on_host;
            default:
                return false;
        }
    }
};

constexpr OffloadPlan offload_plan(Offload o) {
    return OffloadPlan{o != Offload::none, o == Offload::optimizer_params};
}

}  // namespace tune
