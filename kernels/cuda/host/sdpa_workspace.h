// The device bytes cuDNN's attention plans may take as workspace, as tune's
// estimate counts them: an upper bound the backend checks each plan against
// (a plan that wants more is not used: tune's kernels run, and the trial says
// why). Header-only, so the cuDNN stand-in the tests load reports exactly it.
#pragma once

#include <cstdint>

namespace tune::kernels::cuda::cudnn {

inline constexpr std::int64_t kSdpaPlanSlackBytes = std::int64_t{1} << 20;

// Forward: scratch only. Backward: two fp32 values per query row (the row sum
// of dO · O and the softmax's), beside the dQ accumulator the caller provides.
inline constexpr std::int64_t sdpa_plan_workspace_bound(std::int64_t batch, std::int64_t heads, std::int64_t seq,
                                                        bool backward) {
    return kSdpaPlanSlackBytes + (backward ? 2 * batch * heads * seq * 4 : 0);
}

}  // namespace tune::kernels::cuda::cudnn
