#include "store/record_json.h"

#include <cmath>

namespace tune {
namespace {

nlohmann::json components_json(const MemoryBreakdown& m) {
    nlohmann::json j = nlohmann::json::object();
    for (Component c : kComponents) j[std::string(to_string(c))] = m[c];
    return j;
}

// NaN (a diverged loss, an untimed step) has no JSON form; null says "no number".
nlohmann::json number_or_null(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); }

nlohmann::json estimate_json(const std::optional<Estimate>& e) {
    if (!e) return nullptr;
    nlohmann::json j{{"peak_bytes", e->memory.peak},
                     {"peak_phase", e->memory.peak_phase},
                     {"step_s", e->step_s},
                     {"tokens_per_s", e->tokens_per_s},
                     {"mfu", e->mfu},
                     {"fits", e->fits},
                     {"memory", components_json(e->memory)}};
    // The machine speed step_s holds for (the probes' speed reference); absent without probes.
    if (e->speed_reference_s > 0) j["speed_reference_s"] = e->speed_reference_s;
    if (e->pace_exponent != 1)
        j["pace_exponent"] = e->pace_exponent;  // what calibration had learned (core/machine_speed.h)
    // Offload's host ledger per rank, per node, and the limit a configuration that does not fit passes.
    if (e->host_memory.peak > 0) {
        j["host_memory"] = {{"peak", e->host_memory.peak}, {"memory", components_json(e->host_memory)}};
        j["host_node_bytes"] = e->host_node_bytes;
    }
    if (!e->limit.empty()) j["limit"] = e->limit;
    return j;
}

nlohmann::json measured_json(const TrialRecord& t) {
    if (!t.measured) return nullptr;
    const TrialResult& r = t.result;
    nlohmann::json j{{"peak_bytes", r.memory.peak},      {"peak_phase", r.memory.peak_phase},
                     {"tokens_per_s", r.tokens_per_s},   {"mfu", r.mfu},
                     {"comm_bytes", r.comm_bytes},       {"comm_s", r.comm_s},
                     {"oom_requested", r.oom_requested}, {"oom_live", r.oom_live},
                     {"rank_peaks", r.rank_peaks},       {"memory", components_json(r.memory)}};
    j["median_step_s"] = t.median_step_s ? nlohmann::json(*t.median_step_s) : nlohmann::json();
    // The step-time noise (Google Benchmark's statistics over the timed steps); null when none was timed.
    const auto or_null = [](const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(); };
    j["mean_step_s"] = or_null(t.mean_step_s);
    j["stddev_step_s"] = or_null(t.stddev_step_s);
    j["step_cv"] = or_null(t.step_cv);
    j["timed_steps"] = t.timed_steps > 0 ? nlohmann::json(t.timed_steps) : nlohmann::json();
    if (r.speed_reference_s > 0) j["speed_reference_s"] = r.speed_reference_s;  // the machine's pace during the steps
    j.update(machine_memory_json(r));
    if (!r.rank_host_peaks.empty())  // offload's host ledger: the rank with the most, and every rank's peak
        j["host_memory"] = {{"peak", r.host_memory.peak},
                            {"memory", components_json(r.host_memory)},
                            {"rank_peaks", r.rank_host_peaks}};
    nlohmann::json steps = nlohmann::json::array();
    const std::size_t n = std::max(r.step_ms.size(), r.losses.size());
    for (std::size_t i = 0; i < n; ++i)
        steps.push_back({{"step", i},
                         {"step_ms", i < r.step_ms.size() ? number_or_null(r.step_ms[i]) : nlohmann::json()},
                         {"loss", i < r.losses.size() ? number_or_null(r.losses[i]) : nlohmann::json()}});
    if (!steps.empty()) j["steps"] = steps;
    return j;
}

nlohmann::json time_json(const std::optional<Timestamp>& t) {
    return t ? nlohmann::json(format_timestamp(*t)) : nlohmann::json();
}

}  // namespace

nlohmann::json record_json(const TrialRecord& t) {
    return {{"id", t.id},
            {"sweep", t.sweep_name},
            {"config_hash", t.config_hash},
            {"status", to_string(t.result.status)},
            {"reason", t.result.reason},
            {"attempts", t.attempts},
            {"config", t.result.config},
            {"estimate", estimate_json(t.result.estimate)},
            {"measured", measured_json(t)},
            {"started_at", time_json(t.started_at)},
            {"ended_at", time_json(t.ended_at)},
            {"stderr_tail", t.stderr_tail}};
}

nlohmann::json sweep_json(const SweepSummary& s) {
    const SweepRecord& r = s.record;
    nlohmann::json counts = nlohmann::json::object();
    for (TrialStatus st : kStatuses) counts[std::string(to_string(st))] = s.count(st);
    return {{"id", s.id},
            {"name", r.name},
            {"spec_hash", r.spec_hash},
            {"created_at", format_timestamp(r.created_at)},
            {"host", r.host},
            {"device", {{"name", r.device.name}, {"count", r.device.count}, {"memory_bytes", r.device.memory_bytes}}},
            {"backend", r.backend},
            {"software",
             {{"tune", r.software.tune_version},
              {"git_commit", r.software.git_commit},
              {"cuda", r.software.cuda},
              {"nccl", r.software.nccl},
              {"driver", r.software.driver}}},
            {"trials", s.total()},
            {"counts", counts}};
}

std::string dump_json(const nlohmann::json& j) {
    return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace tune
