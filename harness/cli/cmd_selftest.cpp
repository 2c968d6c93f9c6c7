// `tune selftest [--device N] [--json] [--op NAME]`: every backend op on
// random inputs, then three training steps per optimizer and precision,
// CUDA against the CPU backend, one table row per case.
// Exit 0 when all pass (or when there is no GPU: every case is listed as
// skipped and the reason said), 1 when any case fails or errors.
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "harness/cli/commands.h"
#include "harness/selftest_training.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/device_query.h"
#include "kernels/selftest/selftest.h"
#include "reports/text_table.h"
#include "search/units.h"

namespace tune::cli {
namespace {

namespace st = kernels::selftest;

struct SelftestOptions {
    int device = 0;
    bool json = false;
    std::string op;                 // only cases whose op contains this
    std::string candidate = "cuda"; // "cpu" compares the CPU backend with itself (checks the harness)
    std::uint64_t seed = 20240611;
};

std::string number(double v) { return fmt::format("{:.2e}", v); }

void print_table(const std::vector<st::CaseResult>& results) {
    TextTable table({"op", "dtype", "shape", "output", "nmse", "max err", "tol nmse", "tol max", "result"});
    for (const auto& r : results) {
        const st::OutputResult* w = r.worst();
        if (w == nullptr) {
            table.add_row({r.op, r.dtype, r.shape, "", "", "", "", "", std::string(st::status_name(r.status))});
            continue;
        }
        table.add_row({r.op, r.dtype, r.shape, w->name, number(w->stats.nmse), number(w->stats.max_abs),
                       number(w->tolerance.max_nmse), number(w->tolerance.max_abs),
                       std::string(st::status_name(r.status))});
    }
    fmt::print("{}", table.render());
    for (const auto& r : results)
        if (r.status == st::Status::error) fmt::print("error: {} {} {}: {}\n", r.op, r.dtype, r.shape, r.message);
}

nlohmann::json to_json(const st::CaseResult& r) {
    nlohmann::json outputs = nlohmann::json::array();
    for (const auto& o : r.outputs)
        outputs.push_back({{"name", o.name},
                           {"dtype", kernels::dtype_name(o.dtype)},
                           {"class", st::op_class_name(o.op_class)},
                           {"nmse", o.stats.nmse},
                           {"max_abs", o.stats.max_abs},
                           {"worst_index", o.stats.worst},
                           {"nonfinite_mismatches", o.stats.mismatched_nonfinite},
                           {"tol_nmse", o.tolerance.max_nmse},
                           {"tol_max_abs", o.tolerance.max_abs},
                           {"pass", o.pass}});
    nlohmann::json j{{"op", r.op}, {"dtype", r.dtype}, {"shape", r.shape}, {"status", st::status_name(r.status)},
                     {"outputs", outputs}};
    if (!r.message.empty()) j["message"] = r.message;
    return j;
}

struct Tally {
    int pass = 0, fail = 0, error = 0, skipped = 0;
    explicit Tally(const std::vector<st::CaseResult>& results) {
        for (const auto& r : results) {
            if (r.status == st::Status::pass) ++pass;
            else if (r.status == st::Status::fail) ++fail;
            else if (r.status == st::Status::error) ++error;
            else ++skipped;
        }
    }
};

void report(const std::vector<st::CaseResult>& results, const std::string& against, const std::string& note,
            const SelftestOptions& o) {
    const Tally t(results);
    if (o.json) {
        nlohmann::json cases = nlohmann::json::array();
        for (const auto& r : results) cases.push_back(to_json(r));
        nlohmann::json out{{"reference", "cpu"}, {"candidate", against}, {"seed", o.seed},
                           {"passed", t.pass}, {"failed", t.fail}, {"errors", t.error}, {"skipped", t.skipped},
                           {"cases", cases}};
        if (!note.empty()) out["note"] = note;
        fmt::print("{}\n", out.dump(2));
        return;
    }
    if (!note.empty()) fmt::print("{}\n", note);
    print_table(results);
    fmt::print("{} cases: {} passed, {} failed, {} errors, {} skipped (reference cpu, candidate {})\n",
               results.size(), t.pass, t.fail, t.error, t.skipped, against);
}

// Why the CUDA candidate cannot run here, or empty when it can.
std::string why_no_gpu(int device) {
    if (!kernels::cuda_backend_compiled()) return "this build of tune has no CUDA backend";
    const DeviceQuery q = query_devices();
    if (q.devices.empty()) return "no CUDA device: " + q.why_none;
    if (device < 0 || device >= static_cast<int>(q.devices.size()))
        return fmt::format("no CUDA device {} ({} visible)", device, q.devices.size());
    return {};
}

std::string memory_note(const kernels::Backend& backend) {
    const auto m = kernels::cuda_memory_stats(backend);
    if (!m) return {};
    return fmt::format("device memory: context {}, cuBLASLt {}, backend scratch {}, pool high-water {} (of {})",
                       format_bytes(m->context_bytes), format_bytes(m->cublas_bytes), format_bytes(m->backend_bytes),
                       format_bytes(m->pool_reserved_high_bytes), format_bytes(m->total_bytes));
}

int run_selftest(const SelftestOptions& o) {
    std::vector<st::Case> all = st::standard_cases();
    for (auto& c : harness::training_cases()) all.push_back(std::move(c));
    const std::vector<st::Case> cases = st::filter_cases(std::move(all), o.op);
    std::vector<st::CaseResult> results;
    const bool on_cpu = o.candidate == "cpu";
    const std::string why = on_cpu ? std::string() : why_no_gpu(o.device);
    if (!why.empty()) {
        for (const auto& c : cases) results.push_back(st::skipped_case(c, why));
        report(results, fmt::format("cuda:{}", o.device), why + "; every case is skipped", o);
        return kExitOk;
    }
    kernels::CpuBackend reference;
    std::unique_ptr<kernels::Backend> candidate =
        on_cpu ? std::make_unique<kernels::CpuBackend>() : kernels::make_cuda_backend(o.device);
    for (const auto& c : cases) results.push_back(st::run_case(c, reference, *candidate, o.seed));
    report(results, std::string(candidate->name()), memory_note(*candidate), o);
    const Tally t(results);
    return t.fail + t.error == 0 ? kExitOk : kExitNo;
}

}  // namespace

void add_selftest_command(CLI::App& app, int& exit_code) {
    auto* cmd = app.add_subcommand("selftest", "Run every backend op on the GPU and the CPU and compare (exit 1 on any "
                                               "failure; without a GPU every case is skipped and the exit is 0).");
    auto o = std::make_shared<SelftestOptions>();
    cmd->add_option("--device", o->device, "CUDA device index")->capture_default_str();
    cmd->add_flag("--json", o->json, "Print one JSON object");
    cmd->add_option("--op", o->op, "Only cases whose op name contains this (e.g. attention, adam, train)");
    cmd->add_option("--candidate", o->candidate, "Backend compared with the CPU: cuda, or cpu to check the harness")
        ->check(CLI::IsMember({"cuda", "cpu"}))
        ->capture_default_str();
    cmd->add_option("--seed", o->seed, "Seed of the random inputs")->capture_default_str();
    cmd->callback([&exit_code, o] { exit_code = run_selftest(*o); });
}

}  // namespace tune::cli
