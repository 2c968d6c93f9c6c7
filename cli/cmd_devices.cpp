// `tune devices`: the CUDA devices this process sees, matched to presets.
#include <memory>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/device_query_child.h"
#include "core/presets.h"
#include "core/units.h"
#include "kernels/cuda/host/cudnn_library.h"
#include "kernels/device_query.h"
#include "reports/text_table.h"

namespace tune::cli {
namespace {

std::string cuda_version(int v) { return v ? fmt::format("{}.{}", v / 1000, (v % 1000) / 10) : "none"; }

void print_devices(const DeviceQuery& q, bool as_json) {
    const kernels::cuda::CudnnLoad cudnn = kernels::cuda::load_cudnn();
    if (as_json) {
        nlohmann::json j = device_query_to_json(q);
        j["cudnn"] = {{"usable", cudnn.library.has_value()},
                      {"version", cudnn.library ? kernels::cuda::cudnn_version_text(cudnn.library->version) : ""},
                      {"path", cudnn.library ? cudnn.library->path : ""},
                      {"why_not", cudnn.why_not},
                      {"attention", "tune"}};
        fmt::print("{}\n", j.dump(2));
        return;
    }
    fmt::print("CUDA backend compiled: {}; runtime {}; driver {}\n", q.cuda_compiled ? "yes" : "no",
               cuda_version(q.runtime_version), cuda_version(q.driver_version));
    fmt::print("{}\n", kernels::cuda::cudnn_status_line(cudnn));
    if (const int branch = minimum_driver_branch(q.runtime_version); branch > 0)
        fmt::print(
            "This build's CUDA {} runtime needs an NVIDIA driver of branch R{} or newer (build with "
            "-DTUNE_CUDA_ROOT=<an older toolkit> for older drivers; see docs/commands.md).\n",
            cuda_version(q.runtime_version), branch);
    if (q.devices.empty()) {
        fmt::print("devices: none ({})\n", q.why_none);
        fmt::print(
            "Sweeps that need GPUs run estimate-only here; sweeps with device = \"cpu\" run on the CPU backend.\n");
        return;
    }
    TextTable table({"#", "name", "memory", "free", "sm", "SMs", "preset"});
    for (const auto& d : q.devices) {
        auto preset = match_device(d.name, d.total_memory);
        table.add_row({std::to_string(d.index), d.name, format_bytes(d.total_memory),
                       d.free_memory > 0 ? format_bytes(d.free_memory) : std::string("unknown (no NVML)"),
                       fmt::format("{}.{}", d.compute_major, d.compute_minor), std::to_string(d.multiprocessors),
                       preset ? preset->device : "(no preset: estimates use nominal numbers)"});
    }
    fmt::print("{}", table.render());
}

}  // namespace

void add_devices_command(CLI::App& app, int& exit_code) {
    auto* cmd =
        app.add_subcommand("devices", "List the CUDA devices visible to this process, or say why there are none.");
    auto as_json = std::make_shared<bool>(false);
    cmd->add_flag("--json", *as_json, "Print one JSON object");
    cmd->callback([&exit_code, as_json] {
        print_devices(query_devices(), *as_json);
        exit_code = kExitOk;
    });
}

}  // namespace tune::cli
