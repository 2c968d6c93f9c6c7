// cuDNN's fused attention for one CUDA backend: the library loaded once, a
// handle on the backend's stream, and a plan per attention layout, made on
// first use and kept (a refusal is kept too, so it is asked once).
// forward()/backward() answer false where cuDNN does not run the call (32-bit
// data, dQ over dO's memory, no engine here, a plan above the workspace
// the estimate counts): the backend then runs its own kernels. path() says
// which ran and why, for `tune devices` and a trial's result.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "kernels/backend.h"
#include "kernels/cuda/host/cudnn_library.h"
#include "kernels/cuda/host/cudnn_plan.h"
#include "kernels/cuda/host/sdpa_graph.h"

namespace tune::kernels::cuda::cudnn {

class CudnnAttention {
public:
    // Zeroes device bytes on the backend's stream (the dQ accumulator before each backward).
    using Zero = std::function<void(void* device, std::uint64_t bytes)>;

    // cuDNN on `stream`, or null with `why_not` (not found, too old, no handle here).
    static std::unique_ptr<CudnnAttention> open(const CudnnLoad& load, void* stream, Zero zero, std::string& why_not);
    ~CudnnAttention();
    CudnnAttention(const CudnnAttention&) = delete;
    CudnnAttention& operator=(const CudnnAttention&) = delete;

    bool forward(const AttentionForwardArgs& a, Workspace ws);
    bool backward(const AttentionBackwardArgs& a, Workspace ws);

    // "cuDNN 9.19.0: 24 forward and 24 backward calls; tune's kernels for 0 (...)".
    std::string path() const;

private:
    struct Plan {
        std::unique_ptr<SdpaForwardGraph> forward;
        std::unique_ptr<SdpaBackwardGraph> backward;
        std::unique_ptr<OperationPlan> plan;
        std::string why_not;  // set when cuDNN does not run this layout
    };
    using Key = std::array<std::int64_t, 12>;

    CudnnAttention(CudnnLibrary library, void* handle, Zero zero);
    Plan& plan_for(const SdpaLayout& l, bool backward);
    bool refused(const std::string& why);
    static bool workspace_fits(const AttentionShape& s, DType dtype, Workspace ws);

    CudnnLibrary library_;
    void* handle_ = nullptr;
    Zero zero_;
    std::map<Key, Plan> plans_;
    std::int64_t forward_calls_ = 0, backward_calls_ = 0, fallbacks_ = 0;
    std::string last_fallback_;
};

}  // namespace tune::kernels::cuda::cudnn
