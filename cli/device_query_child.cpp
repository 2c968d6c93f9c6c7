#include "cli/device_query_child.h"

#include <fmt/format.h>

#include "core/presets.h"
#include "kernels/cuda/cuda_backend.h"
#include "launch/launch.h"
#include "launch/process.h"

namespace tune::cli {

nlohmann::json device_query_to_json(const DeviceQuery& q) {
    nlohmann::json out{{"cuda_compiled", q.cuda_compiled},
                       {"runtime_version", q.runtime_version},
                       {"driver_version", q.driver_version},
                       {"minimum_driver_branch", minimum_driver_branch(q.runtime_version)},
                       {"why_none", q.why_none},
                       {"devices", nlohmann::json::array()}};
    for (const auto& d : q.devices) {
        const auto preset = match_device(d.name, d.total_memory);
        out["devices"].push_back({{"index", d.index},
                                  {"name", d.name},
                                  {"total_memory", d.total_memory},
                                  {"free_memory", d.free_memory},
                                  {"compute_capability", fmt::format("{}.{}", d.compute_major, d.compute_minor)},
                                  {"compute_major", d.compute_major},
                                  {"compute_minor", d.compute_minor},
                                  {"multiprocessors", d.multiprocessors},
                                  {"preset", preset ? preset->device : ""}});
    }
    return out;
}

DeviceQuery device_query_from_json(const nlohmann::json& j) {
    DeviceQuery q;
    q.cuda_compiled = j.at("cuda_compiled").get<bool>();
    q.runtime_version = j.at("runtime_version").get<int>();
    q.driver_version = j.at("driver_version").get<int>();
    q.why_none = j.at("why_none").get<std::string>();
    for (const auto& d : j.at("devices")) {
        VisibleDevice v;
        v.index = d.at("index").get<int>();
        v.name = d.at("name").get<std::string>();
        v.total_memory = d.at("total_memory").get<std::uint64_t>();
        v.free_memory = d.at("free_memory").get<std::uint64_t>();
        v.compute_major = d.at("compute_major").get<int>();
        v.compute_minor = d.at("compute_minor").get<int>();
        v.multiprocessors = d.at("multiprocessors").get<int>();
        q.devices.push_back(std::move(v));
    }
    return q;
}

DeviceQuery query_devices_in_child() {
    if (!kernels::cuda_backend_compiled()) return query_devices();
    ProcessSpec spec;
    spec.argv = {self_executable(), "devices", "--json"};
    spec.timeout_s = 60;  // a wedged driver must not hang the sweep
    const ProcessOutcome out = run_process(spec);
    DeviceQuery failed;
    failed.cuda_compiled = true;
    if (out.exit_code != 0) {
        failed.why_none = fmt::format("`tune devices --json` ended with {}: {}", out.describe(), out.stderr_tail);
        return failed;
    }
    try {
        return device_query_from_json(nlohmann::json::parse(out.stdout_text));
    } catch (const nlohmann::json::exception& e) {
        failed.why_none = fmt::format("`tune devices --json` printed unreadable JSON: {}", e.what());
        return failed;
    }
}

}  // namespace tune::cli
