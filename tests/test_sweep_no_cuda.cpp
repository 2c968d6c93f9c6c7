// The sweep process never loads the CUDA driver or NVML itself: it asks a
// `tune devices --json` child (cli/device_query_child.h). The dynamic
// loader's own log (LD_DEBUG=libs, one file per process) shows which process
// looked for libcuda.so.1.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "kernels/cuda/cuda_backend.h"
#include "support/run_command.h"

namespace fs = std::filesystem;
using tune::test::run_command;

namespace {

std::string read_all(const fs::path& p) {
    std::ifstream in(p);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

bool loads_driver(const std::string& loader_log) {
    return loader_log.find("libcuda.so") != std::string::npos ||
           loader_log.find("libnvidia-ml.so") != std::string::npos;
}

}  // namespace

TEST_CASE("the sweep process asks a child for the devices and never loads the CUDA driver itself") {
    if (!tune::kernels::cuda_backend_compiled()) {
        WARN("this build has no CUDA backend: there is no driver to load, nothing to check");
        return;
    }
    const fs::path dir = fs::temp_directory_path() / fs::path("tune-no-cuda-" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    // `exec` keeps the shell's pid, so the sweep's own loader log is ld.<pid>.
    const std::string command = "sh -c 'echo $$ > " + (dir / "pid").string() + "; exec env LD_DEBUG=libs LD_DEBUG_OUTPUT=" +
                                (dir / "ld").string() + " " + TUNE_BINARY + " sweep " + TUNE_SOURCE_DIR +
                                "/sweeps/llama7b.toml --db " + (dir / "r.db").string() + " --no-report' 2>&1";
    const auto r = run_command(command);
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    const std::string pid = std::to_string(std::stol(read_all(dir / "pid")));
    const fs::path own_log = dir / ("ld." + pid);
    REQUIRE(fs::exists(own_log));
    CHECK_FALSE(loads_driver(read_all(own_log)));
    bool child_loaded = false;  // the check is live: some process did look for the driver
    for (const auto& e : fs::directory_iterator(dir))
        if (e.path() != own_log && e.path().filename().string().rfind("ld.", 0) == 0 && loads_driver(read_all(e.path())))
            child_loaded = true;
    CHECK(child_loaded);
    fs::remove_all(dir);
}
