// An operation graph made runnable: the graph finalized on a handle, the
// engine configurations cuDNN's heuristics rank, and the first of them whose
// execution plan finalizes. A graph no engine takes here (NOT_SUPPORTED from
// every configuration, or no configuration) is an answer, not an error: the
// caller runs tune's own kernels and reports why.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cuda/host/cudnn_descriptor.h"

namespace tune::kernels::cuda::cudnn {

class OperationPlan {
public:
    // The plan, or null with `why_not` saying what refused it. Faults other
    // than NOT_SUPPORTED (a bad parameter, a failed allocation) throw CallError.
    static std::unique_ptr<OperationPlan> make(const CudnnApi& api, void* handle, const std::vector<void*>& operations,
                                               std::string& why_not);

    // Device bytes the plan needs as workspace; known only once it is made.
    std::int64_t workspace_bytes() const { return workspace_; }
    // Runs it on the handle's stream: `pointers[i]` is the tensor with unique id
    // `uids[i]` (by-value tensors point to host memory).
    void execute(void* handle, const std::vector<std::int64_t>& uids, const std::vector<void*>& pointers,
                 void* workspace) const;

private:
    OperationPlan(Descriptor graph, Descriptor plan, std::int64_t workspace);

    Descriptor graph_;
    Descriptor plan_;
    std::int64_t workspace_ = 0;
};

}  // namespace tune::kernels::cuda::cudnn
