// The sweep process never loads the CUDA driver or NVML itself: it asks a
// `tune devices --json` child (cli/device_query_child.h). The dynamic
// loader's own log (LD_DEBUG=files, one file per process) shows which process
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

// Lines like "file=libcuda.so.1 [0];  dynamically loaded by /path/libcudart.so.13 [0]".
// libcublasLt's library constructor dlopens libcuda in every process linked
// with it, at load time and without initialising the driver; only loads on
// behalf of the CUDA runtime or NVML (a query) count.
bool loads_driver(const std::string& loader_log) {
    std::istringstream lines(loader_log);
    for (std::string line; std::getline(lines, line);) {
        const bool driver =
            line.find("file=libcuda.so") != std::string::npos || line.find("file=libnvidia-ml.so") != std::string::npos;
        if (driver && line.find("libcublasLt") == std::string::npos) return true;
    }
    return false;
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
    const std::string command = "sh -c 'echo $$ > " + (dir / "pid").string() +
                                "; exec env LD_DEBUG=files LD_DEBUG_OUTPUT=" + (dir / "ld").string() + " " +
                                TUNE_BINARY + " sweep " + TUNE_SOURCE_DIR + "/sweeps/llama7b.toml --db " +
                                (dir / "r.db").string() + " --no-report' 2>&1";
    const auto r = run_command(command);
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    const std::string pid = std::to_string(std::stol(read_all(dir / "pid")));
    const fs::path own_log = dir / ("ld." + pid);
    REQUIRE(fs::exists(own_log));
    CHECK_FALSE(loads_driver(read_all(own_log)));
    bool child_loaded = false;  // the check is live: some process did look for the driver
    for (const auto& e : fs::directory_iterator(dir))
        if (e.path() != own_log && e.path().filename().string().rfind("ld.", 0) == 0 &&
            loads_driver(read_all(e.path())))
            child_loaded = true;
    CHECK(child_loaded);
    fs::remove_all(dir);
}
