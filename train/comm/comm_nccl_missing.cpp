// A build without the CUDA backend has no NCCL: the factories of
// train/comm/comm_nccl.h say so (CommError), so callers need no #ifdefs.
// train/CMakeLists.txt compiles this file instead of comm_nccl.cpp.
#include "train/comm/comm_error.h"
#include "train/comm/comm_nccl.h"

namespace tune::train {
namespace {

[[noreturn]] void no_nccl() {
    throw CommError(
        "nccl: this build of tune has no NCCL (built without the CUDA backend: TUNE_CUDA=OFF or nvcc "
        "was not found); GPU ranks need a CUDA build");
}

}  // namespace

bool nccl_compiled() { return false; }
int bind_local_device(int) { no_nccl(); }
NcclId new_nccl_id() { no_nccl(); }
std::unique_ptr<Comm> make_nccl_comm(const NcclId&, int, int, const NcclPlacement&) { no_nccl(); }
std::unique_ptr<Comm> make_nccl_comm(const MpiRuntime&, const NcclPlacement&) { no_nccl(); }
std::unique_ptr<Comm> make_nccl_comm(const MpiRuntime&, int, kernels::Backend*) { no_nccl(); }
std::unique_ptr<Comm> make_nccl_comm_from_environment(kernels::Backend*) { no_nccl(); }

}  // namespace tune::train
