// Message format of failed library calls.
#include "kernels/cuda/host/call_error.h"

#include <fmt/format.h>

namespace tune::kernels::cuda {

std::string_view library_name(Library library) {
    switch (library) {
        case Library::cuda:
            return "cuda";
        case Library::cublas:
            return "cublas";
        case Library::nccl:
            return "nccl";
        case Library::cudnn:
            return "cudnn";
    }
    return "?";
}

namespace {

// Paths as the build passed them are absolute; from the repository root on they read better.
std::string_view repository_relative(std::string_view file) {
    for (std::string_view top : {"/kernels/", "/train/", "/tests/"}) {
        const auto at = file.rfind(top);
        if (at != std::string_view::npos) return file.substr(at + 1);
    }
    return file;
}

}  // namespace

std::string describe(const CallFailure& f) {
    return fmt::format("{}: {} failed with {} ({}): {} at {}:{}", library_name(f.library), f.site.call, f.code_name,
                       f.code, f.description.empty() ? "no description" : f.description,
                       repository_relative(f.site.file), f.site.line);
}

}  // namespace tune::kernels::cuda
