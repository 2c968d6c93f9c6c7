#include "driver/collective_probes.h"

#include <cstdio>
#include <map>
#include <stdexcept>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "launch/launch.h"
#include "launch/process.h"

namespace tune {
namespace {

// Generous: the probes repeat for min_seconds each, but MPI's start-up takes a few seconds.
constexpr double kProbeTimeoutS = 120;

// The last line that is not blank: rank 0's result, after whatever MPI or the ranks logged before it.
std::string last_line(std::string_view text) {
    const std::size_t end = text.find_last_not_of(" \t\r\n");
    if (end == std::string_view::npos) return {};
    const std::size_t newline = text.rfind('\n', end);
    const std::size_t begin = newline == std::string_view::npos ? 0 : newline + 1;
    return std::string(text.substr(begin, end + 1 - begin));
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

// The plan: a JSON array of the probes' keys (probe/probe_records.h).
std::string collective_plan_json(const std::vector<CollectiveRate>& plan) {
    nlohmann::json j = nlohmann::json::array();
    for (const CollectiveRate& c : plan) j.push_back(probe::probe_key(c));
    return j.dump();
}

std::vector<CollectiveRate> parse_collective_plan(const std::string& json) {
    const nlohmann::json keys = nlohmann::json::parse(json);
    if (!keys.is_array()) throw std::invalid_argument("--plan: not a JSON array of collective probes: " + json);
    std::vector<CollectiveRate> out;
    for (const nlohmann::json& key : keys) {
        auto c = probe::collective_from_key(key);
        if (!c) throw std::invalid_argument("--plan: not a collective probe: " + key.dump());
        out.push_back(*c);
    }
    return out;
}

// Rank 0's result line: per probe its key, bus bandwidth and seconds.
std::string collective_result_line(const std::vector<probe::CollectiveResult>& results) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& r : results)
        j.push_back(
            {{"key", probe::probe_key(r.rate)}, {"bus_bytes_per_s", r.rate.bus_bytes_per_s}, {"seconds", r.seconds}});
    return j.dump();
}

std::vector<probe::CollectiveResult> parse_collective_results(const std::string& stdout_text) {
    std::vector<probe::CollectiveResult> out;
    for (const auto& r : nlohmann::json::parse(last_line(stdout_text))) {
        auto rate = probe::collective_from_key(r.at("key"));
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
