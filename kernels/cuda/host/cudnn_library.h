// cuDNN through dlopen, so tune builds and runs where it is absent. The calls
// of the backend (graph) API the fused attention uses are a small function
// table declared with cuDNN's C signatures (enums pass as int, handles and
// descriptors as void*): no cuDNN header or link dependency.
//
// Where the library is found: $TUNE_CUDNN_LIBRARY (a path, e.g. the torch
// wheel's site-packages/nvidia/cudnn/lib/libcudnn.so.9, or `off` for tune's
// own attention kernels), then the loader's search path, then the CUDA
// toolkit this build used. A library older than
// 9.15.1 is refused: earlier versions mishandle sequence lengths that are not
// a multiple of 128, and tune's own attention kernels run instead.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tune::kernels::cuda {

// cuDNN's version number, major * 10000 + minor * 100 + patch (cudnnGetVersion).
inline constexpr std::size_t kCudnnMinimumVersion = 91501;  // 9.15.1

struct CudnnApi {
    using Status = int;
    std::size_t (*get_version)() = nullptr;
    const char* (*get_error_string)(Status) = nullptr;
    Status (*create)(void** handle) = nullptr;
    Status (*destroy)(void* handle) = nullptr;
    Status (*set_stream)(void* handle, void* stream) = nullptr;
    Status (*create_descriptor)(int type, void** descriptor) = nullptr;
    Status (*destroy_descriptor)(void* descriptor) = nullptr;
    Status (*set_attribute)(void* descriptor, int name, int type, std::int64_t count, const void* elements) = nullptr;
    Status (*get_attribute)(void* descriptor, int name, int type, std::int64_t requested, std::int64_t* count,
                            void* elements) = nullptr;
    Status (*finalize)(void* descriptor) = nullptr;
    Status (*execute)(void* handle, void* plan, void* variant_pack) = nullptr;
};

// A loaded library: its table, version and path; dlclose when the last copy goes.
struct CudnnLibrary {
    std::shared_ptr<void> handle;
    CudnnApi api;
    std::size_t version = 0;
    std::string path;
};

// The outcome of looking for cuDNN: the library when it is usable, else why not
// (not found, a missing symbol, or too old), in words for `tune devices` and a trial.
struct CudnnLoad {
    std::optional<CudnnLibrary> library;
    std::string why_not;  // empty when `library` is set
};

// "9.19.0" from 91900.
std::string cudnn_version_text(std::size_t version);
bool cudnn_version_usable(std::size_t version);

// The places looked in, in order (see the header comment).
std::vector<std::string> cudnn_candidates();
// The first candidate that loads; each one's failure is in why_not when none does.
CudnnLoad load_cudnn(const std::vector<std::string>& candidates = cudnn_candidates());

// One line for `tune devices`: which attention path a GPU trial takes, and why.
std::string cudnn_status_line(const CudnnLoad& load);

}  // namespace tune::kernels::cuda
