#include "kernels/cuda/host/cudnn_library.h"

#include <dlfcn.h>

#include <cstdlib>
#include <type_traits>

#include <fmt/format.h>

namespace tune::kernels::cuda {

namespace {

// Each symbol into its slot; the name of the first one missing, else empty.
std::string bind_all(void* handle, CudnnApi& api) {
    const auto bind = [handle](auto& slot, const char* name) {
        slot = reinterpret_cast<std::remove_reference_t<decltype(slot)>>(dlsym(handle, name));
        return slot != nullptr;
    };
    if (!bind(api.get_version, "cudnnGetVersion")) return "cudnnGetVersion";
    if (!bind(api.get_error_string, "cudnnGetErrorString")) return "cudnnGetErrorString";
    if (!bind(api.create, "cudnnCreate")) return "cudnnCreate";
    if (!bind(api.destroy, "cudnnDestroy")) return "cudnnDestroy";
    if (!bind(api.set_stream, "cudnnSetStream")) return "cudnnSetStream";
    if (!bind(api.create_descriptor, "cudnnBackendCreateDescriptor")) return "cudnnBackendCreateDescriptor";
    if (!bind(api.destroy_descriptor, "cudnnBackendDestroyDescriptor")) return "cudnnBackendDestroyDescriptor";
    if (!bind(api.set_attribute, "cudnnBackendSetAttribute")) return "cudnnBackendSetAttribute";
    if (!bind(api.get_attribute, "cudnnBackendGetAttribute")) return "cudnnBackendGetAttribute";
    if (!bind(api.finalize, "cudnnBackendFinalize")) return "cudnnBackendFinalize";
    if (!bind(api.execute, "cudnnBackendExecute")) return "cudnnBackendExecute";
    return {};
}

// One candidate: the library, or why it is not one tune can use.
CudnnLoad load_one(const std::string& path) {
    void* raw = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (raw == nullptr) {
        const char* error = dlerror();
        return {std::nullopt, fmt::format("{}: {}", path, error != nullptr ? error : "cannot be loaded")};
    }
    CudnnLibrary lib;
    lib.handle = std::shared_ptr<void>(raw, [](void* h) { dlclose(h); });
    lib.path = path;
    if (const std::string missing = bind_all(raw, lib.api); !missing.empty())
        return {std::nullopt, fmt::format("{}: no symbol {} (not cuDNN 9's graph API)", path, missing)};
    lib.version = lib.api.get_version();
    if (!cudnn_version_usable(lib.version))
        return {std::nullopt,
                fmt::format("{}: cuDNN {} is older than {}, whose fused attention handles sequence lengths "
                            "that are not a multiple of 128",
                            path, cudnn_version_text(lib.version), cudnn_version_text(kCudnnMinimumVersion))};
    return {std::move(lib), {}};
}

}  // namespace

std::string cudnn_version_text(std::size_t version) {
    return fmt::format("{}.{}.{}", version / 10000, version / 100 % 100, version % 100);
}

bool cudnn_version_usable(std::size_t version) { return version >= kCudnnMinimumVersion; }

std::vector<std::string> cudnn_candidates() {
    std::vector<std::string> out;
    if (const char* chosen = std::getenv("TUNE_CUDNN_LIBRARY"); chosen != nullptr && *chosen != '\0') {
        out.emplace_back(chosen);
        return out;  // the user's choice, alone: a fallback would hide that it failed
    }
    out.emplace_back("libcudnn.so.9");
#ifdef TUNE_CUDA_LIBRARY_DIR
    out.emplace_back(std::string(TUNE_CUDA_LIBRARY_DIR) + "/libcudnn.so.9");
#endif
    return out;
}

CudnnLoad load_cudnn(const std::vector<std::string>& candidates) {
    if (const char* chosen = std::getenv("TUNE_CUDNN_LIBRARY"); chosen != nullptr && std::string(chosen) == "off")
        return {std::nullopt, "turned off by TUNE_CUDNN_LIBRARY=off"};
    std::string why;
    for (const std::string& path : candidates) {
        CudnnLoad one = load_one(path);
        if (one.library) return one;
        why += (why.empty() ? "" : "; ") + one.why_not;
    }
    return {std::nullopt, why.empty() ? std::string("no place to look for libcudnn.so.9") : why};
}

std::string cudnn_status_line(const CudnnLoad& load) {
    if (!load.library) return fmt::format("cuDNN: not usable ({}); tune's attention kernels run", load.why_not);
    return fmt::format(
        "cuDNN {} at {}: loaded; fused attention in bf16 and f16 runs through its graphs (backward with as many "
        "key/value heads as heads; otherwise tune's kernels)",
        cudnn_version_text(load.library->version), load.library->path);
}

}  // namespace tune::kernels::cuda
