// `tune probe`: the micro-benchmarks the time model uses, at a sweep's own
// shapes (GEMMs per tokens-per-micro-batch and dtype, attention forward and
// backward, the optimizer update's bandwidth), printed; cached in the
// database per host, software version and device, as a sweep does at start.
#include <unistd.h>
#include <memory>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "build_info.h"
#include "cli/commands.h"
#include "core/presets.h"
#include "driver/collective_probes.h"
#include "driver/plan.h"
#include "kernels/device_query.h"
#include "launch/host_name.h"
#include "launch/launch.h"
#include "probe/sweep_probes.h"
#include "reports/text_table.h"
#include "store/store.h"
#include "sweep/spec.h"
#include "train/memory/host_memory.h"

namespace tune::cli {
namespace {

struct ProbeCliOptions {
    std::string file;
    std::string database;
    bool refresh = false;
    bool no_cache = false;
    bool json = false;
    double min_time = 0.02;
};

SoftwareVersions software() {
    SoftwareVersions v;
    v.tune_version = TUNE_VERSION;
    v.git_commit = TUNE_GIT_COMMIT;
    const DeviceQuery q = query_devices();
    if (q.runtime_version) v.cuda = fmt::format("{}.{}", q.runtime_version / 1000, q.runtime_version % 1000 / 10);
    if (q.driver_version) v.driver = fmt::format("{}.{}", q.driver_version / 1000, q.driver_version % 1000 / 10);
    return v;
}

std::string value_text(const probe::ProbeRecord& r) {
    if (r.unit == "FLOP/s") return fmt::format("{:.2f} GFLOP/s", r.value / 1e9);
    if (r.unit == "B/s" && r.value < 1e9) return fmt::format("{:.1f} MB/s", r.value / 1e6);  // MPI between CPU ranks
    if (r.unit == "B/s") return fmt::format("{:.2f} GB/s", r.value / 1e9);
    // An optimizer's pass: also per element updated, the rate the time model uses.
    const nlohmann::json key = nlohmann::json::parse(r.key, nullptr, false);  // discarded when not JSON
    if (const auto o = probe::optimizer_from_key(key); o && o->elements() > 0)
        return fmt::format("{:.3f} ms ({:.3g} ns/element)", r.value * 1e3,
                           r.value * 1e9 / o->elements());  // a GPU's is near 0.01
    return fmt::format("{:.3f} ms", r.value * 1e3);
}

int run_probe(const ProbeCliOptions& o) {
    SweepSpec spec = load_sweep(o.file);
    if (spec.device == "auto") {
        const DeviceQuery q = query_devices();
        std::optional<Hardware> detected;
        if (!q.devices.empty()) detected = match_device(q.devices.front().name, q.devices.front().total_memory);
        resolve_auto_device(spec, detected, train::host_total_bytes());
    }
    std::unique_ptr<Store> store;
    if (!o.no_cache)
        store = std::make_unique<Store>(o.database.empty() ? spec.database : o.database, Store::Mode::read_write);
    probe::ProbeSettings settings;
    settings.min_seconds = o.min_time;
    const std::uint32_t threads = cpu_threads_per_rank(spec);
    const probe::SweepProbes p = probe::probes_for_sweep(
        spec, threads, store.get(), {host_name(), probe::probe_software(software()), ""}, o.refresh, settings,
        collective_prober(spec, {self_executable(), "probe-collectives"}, o.min_time, threads));
    if (o.json) {
        nlohmann::json out{{"cached", p.cached}, {"seconds", p.seconds}, {"probes", nlohmann::json::array()}};
        for (const auto& r : p.records)
            out["probes"].push_back({{"probe", r.name},
                                     {"key", nlohmann::json::parse(r.key)},
                                     {"value", r.value},
                                     {"unit", r.unit},
                                     {"seconds", r.seconds}});
        fmt::print("{}\n", out.dump());
        return kExitOk;
    }
    TextTable table({"probe", "rate or time", "ran"});
    for (const auto& r : p.records) table.add_row({r.name, value_text(r), fmt::format("{:.2f} s", r.seconds)});
    fmt::print("{}", table.render("  "));
    if (p.cached)
        fmt::print("{} probes from the cache (--refresh measures again)\n", p.records.size());
    else
        fmt::print("{} probes measured in {:.1f} s\n", p.records.size(), p.seconds);
    return kExitOk;
}

}  // namespace

void add_probe_command(CLI::App& app, int& exit_code) {
    auto* cmd = app.add_subcommand(
        "probe",
        "Measure what the time model needs at a sweep's shapes: GEMM rates, attention forward and "
        "backward, the element-wise ops, each optimizer's update in each precision (its time per pass "
        "over a layer's and the outer buffer's tensors, and per element), and the bus bandwidth "
        "(nccl-tests' busbw) of all-reduce, reduce-scatter and all-gather at the sweep's world sizes, "
        "over MPI ranks started by the sweep's launcher (NCCL on GPUs). `tune sweep --probe` does this "
        "at start and reuses the rates cached in its database for the same host, software version "
        "and device.");
    auto o = std::make_shared<ProbeCliOptions>();
    cmd->add_option("file", o->file, "Sweep file (TOML), e.g. sweeps/demo.toml")->required();
    cmd->add_option("--db", o->database, "Results database holding the cache (default: the sweep's [output] database)");
    cmd->add_flag("--refresh", o->refresh, "Measure again even when the cache has every probe");
    cmd->add_flag("--no-cache", o->no_cache, "Neither read nor write the database");
    cmd->add_option("--min-time", o->min_time,
                    "Seconds of timed calls each probe adds up, in five rounds whose median it reports; every op "
                    "but a GEMM is timed right after an untimed GEMM, as a step runs it (default 0.02)")
        ->check(CLI::Range(0.001, 10.0));
    cmd->add_flag("--json", o->json, "Print JSON instead of a table");
    cmd->callback([&exit_code, o] { exit_code = run_probe(*o); });
}

}  // namespace tune::cli
