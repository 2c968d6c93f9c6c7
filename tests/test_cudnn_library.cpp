// cuDNN loaded at run time (kernels/cuda/host/cudnn_library.h): the version
// rule, the places looked in, and every way a candidate is refused, against
// the toolkit's real library and against stand-ins built here.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <string>

#include <fmt/format.h>

#include "kernels/cuda/host/cudnn_library.h"
#include "tests/support/run_command.h"
#include "tests/test_store_support.h"

using namespace tune::kernels::cuda;

namespace {

// A shared library with every symbol the table binds, whose cudnnGetVersion answers `version`.
std::string fake_cudnn(const tune::test::ScratchDir& dir, std::size_t version) {
    const std::string source = dir.file(fmt::format("fake{}.c", version));
    const std::string library = dir.file(fmt::format("libfake{}.so", version));
    std::ofstream(source) << fmt::format(
        "#include <stddef.h>\n#include <stdint.h>\n"
        "size_t cudnnGetVersion(void) {{ return {}; }}\n"
        "const char* cudnnGetErrorString(int s) {{ (void)s; return \"\"; }}\n"
        "int cudnnCreate(void** h) {{ (void)h; return 0; }}\n"
        "int cudnnDestroy(void* h) {{ (void)h; return 0; }}\n"
        "int cudnnSetStream(void* h, void* s) {{ (void)h; (void)s; return 0; }}\n"
        "int cudnnBackendCreateDescriptor(int t, void** d) {{ (void)t; (void)d; return 0; }}\n"
        "int cudnnBackendDestroyDescriptor(void* d) {{ (void)d; return 0; }}\n"
        "int cudnnBackendSetAttribute(void* d, int n, int t, int64_t c, const void* e) "
        "{{ (void)d; (void)n; (void)t; (void)c; (void)e; return 0; }}\n"
        "int cudnnBackendGetAttribute(void* d, int n, int t, int64_t r, int64_t* c, void* e) "
        "{{ (void)d; (void)n; (void)t; (void)r; (void)c; (void)e; return 0; }}\n"
        "int cudnnBackendFinalize(void* d) {{ (void)d; return 0; }}\n"
        "int cudnnBackendExecute(void* h, void* p, void* v) {{ (void)h; (void)p; (void)v; return 0; }}\n",
        version);
    const auto built = tune::test::run_command(fmt::format("cc -shared -fPIC -o '{}' '{}' 2>&1", library, source));
    INFO(built.output);
    REQUIRE(built.exit_code == 0);
    return library;
}

}  // namespace

TEST_CASE("cuDNN versions: 9.15.1 and later are used, earlier ones are not", "[cudnn]") {
    CHECK(cudnn_version_text(91900) == "9.19.0");
    CHECK(cudnn_version_text(91501) == "9.15.1");
    CHECK(cudnn_version_usable(91501));
    CHECK(cudnn_version_usable(100000));
    CHECK_FALSE(cudnn_version_usable(91500));
    CHECK_FALSE(cudnn_version_usable(90100));
}

TEST_CASE("a cuDNN stand-in loads when new enough and is refused, saying why, when older or incomplete", "[cudnn]") {
    tune::test::ScratchDir dir;
    const CudnnLoad good = load_cudnn({fake_cudnn(dir, 91900)});
    REQUIRE(good.library);
    CHECK(good.why_not.empty());
    CHECK(good.library->version == 91900);
    CHECK(good.library->api.execute != nullptr);
    CHECK_THAT(cudnn_status_line(good), Catch::Contains("cuDNN 9.19.0") && Catch::Contains("runs through its graphs"));

    const std::string old = fake_cudnn(dir, 91500);
    const CudnnLoad too_old = load_cudnn({old});
    CHECK_FALSE(too_old.library);
    CHECK_THAT(too_old.why_not, Catch::Contains(old) && Catch::Contains("9.15.0 is older than 9.15.1") &&
                                    Catch::Contains("multiple of 128"));
    // The first usable candidate wins; the refusals before it are not an error.
    CHECK(load_cudnn({old, fake_cudnn(dir, 91501)}).library->version == 91501);

    const CudnnLoad not_cudnn = load_cudnn({"libm.so.6"});
    CHECK_FALSE(not_cudnn.library);
    CHECK_THAT(not_cudnn.why_not, Catch::Contains("no symbol cudnnGetVersion"));
    const CudnnLoad missing = load_cudnn({dir.file("absent.so"), old});
    CHECK_FALSE(missing.library);
    CHECK_THAT(missing.why_not, Catch::Contains("absent.so") && Catch::Contains("; ") && Catch::Contains("older"));
    CHECK_THAT(cudnn_status_line(missing), Catch::StartsWith("cuDNN: not usable"));
}

TEST_CASE("TUNE_CUDNN_LIBRARY is the only place looked in when set", "[cudnn]") {
    ::setenv("TUNE_CUDNN_LIBRARY", "/opt/site-packages/nvidia/cudnn/lib/libcudnn.so.9", 1);
    const auto chosen = cudnn_candidates();
    ::unsetenv("TUNE_CUDNN_LIBRARY");
    REQUIRE(chosen.size() == 1);
    CHECK(chosen[0] == "/opt/site-packages/nvidia/cudnn/lib/libcudnn.so.9");
    CHECK(cudnn_candidates().front() == "libcudnn.so.9");
}

#ifdef TUNE_HAVE_CUDA
TEST_CASE("the CUDA toolkit's cuDNN loads here, new enough for the fused attention", "[cudnn]") {
    const CudnnLoad load = load_cudnn();
    INFO(load.why_not);
    REQUIRE(load.library);
    CHECK(cudnn_version_usable(load.library->version));
    CHECK(load.library->api.get_error_string(0) != nullptr);  // CUDNN_STATUS_SUCCESS's text, no device needed
}
#endif
