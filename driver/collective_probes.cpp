#include "driver/collective_probes.h"

#include <cstdio>
#include <map>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "launch/launch.h"
#include "launch/process.h"

namespace tune {
namespace {

// Generous: the probes repeat for min_seconds each, but MPI's start-up takes a few seconds.
constexpr double kProbeTimeoutS = 120;

std::string last_line(const std::string& text) {
    std::istringstream in(text);
    std::string line, last;
    while (std::getline(in, line))
        if (line.find_first_not_of(" \t\r") != std::string::npos) last = line;
    return last;
}

std::vector<probe::CollectiveResult> probe_at(const SweepSpec& spec, const std::vector<std::string>& program,
                                              std::uint32_t ranks, const std::vector<CollectiveRate>& plan,
                                              double min_seconds, std::uint32_t threads) {
    std::vector<std::string> argv = program;
    argv.insert(argv.end(), {"--plan", collective_plan_json(plan), "--min-time", fmt::format("{}", min_seconds),
                             "--backend", std::string(to_string(spec.hardware.backend))});
    if (spec.hardware.backend == BackendKind::cpu) argv.insert(argv.end(), {"--threads", std::to_string(threads)});
    ProcessSpec p;
    p.argv = launch_command(choose_launcher(spec.trial.launcher, ranks), ranks, argv);
    p.timeout_s = kProbeTimeoutS;
    const ProcessOutcome out = run_process(p);
    try {
        if (out.exit_code == 0) return parse_collective_results(out.stdout_text);
    } catch (const std::exception&) {
    }
    fmt::print(stderr, "probe: collectives at {} ranks: no result ({}); their time stays at the nominal link rate\n{}",
               ranks, out.describe(), out.stderr_tail);
    return {};
}

}  // namespace

std::string collective_plan_json(const std::vector<CollectiveRate>& plan) {
    nlohmann::json j = nlohmann::json::array();
    for (const CollectiveRate& c : plan) j.push_back(probe::collective_record_name(c));
    return j.dump();
}

std::vector<CollectiveRate> parse_collective_plan(const std::string& json) {
    std::vector<CollectiveRate> out;
    for (const auto& name : nlohmann::json::parse(json).get<std::vector<std::string>>()) {
        auto c = probe::parse_collective_record(name);
        if (!c) throw std::invalid_argument("--plan: not a collective probe: " + name);
        out.push_back(*c);
    }
    return out;
}

std::string collective_result_line(const std::vector<probe::CollectiveResult>& results) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& r : results)
        j.push_back({{"probe", probe::collective_record_name(r.rate)},
                     {"bus_bytes_per_s", r.rate.bus_bytes_per_s},
                     {"seconds", r.seconds}});
    return j.dump();
}

std::vector<probe::CollectiveResult> parse_collective_results(const std::string& stdout_text) {
    std::vector<probe::CollectiveResult> out;
    for (const auto& r : nlohmann::json::parse(last_line(stdout_text))) {
        auto rate = probe::parse_collective_record(r.at("probe").get<std::string>());
        if (!rate) continue;
        rate->bus_bytes_per_s = r.at("bus_bytes_per_s").get<double>();
        out.push_back({*rate, r.at("seconds").get<double>()});
    }
    return out;
}

probe::CollectiveProber collective_prober(const SweepSpec& spec, std::vector<std::string> program, double min_seconds,
                                          std::uint32_t threads) {
    return [spec, program = std::move(program), min_seconds, threads](const std::vector<CollectiveRate>& plan) {
        std::map<std::uint32_t, std::vector<CollectiveRate>> by_ranks;
        for (const CollectiveRate& c : plan) by_ranks[c.ranks].push_back(c);
        std::vector<probe::CollectiveResult> out;
        for (const auto& [ranks, part] : by_ranks)
            for (auto& r : probe_at(spec, program, ranks, part, min_seconds, threads)) out.push_back(r);
        return out;
    };
}

}  // namespace tune
