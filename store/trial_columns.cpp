#include "store/trial_columns.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "store/row_checks.h"

namespace tune::sql {
namespace {

// All components in one statement: ?1 trial, then (component, estimated, measured) per component.
constexpr Sql kUpsertMemory{"write_trial_memory", R"sql(
INSERT INTO trial_memory (trial_id, component, estimated_bytes, measured_bytes) VALUES
    (?1, ?2, ?3, ?4), (?1, ?5, ?6, ?7), (?1, ?8, ?9, ?10), (?1, ?11, ?12, ?13), (?1, ?14, ?15, ?16),
    (?1, ?17, ?18, ?19), (?1, ?20, ?21, ?22), (?1, ?23, ?24, ?25), (?1, ?26, ?27, ?28)
ON CONFLICT (trial_id, component) DO UPDATE SET
    estimated_bytes = coalesce(excluded.estimated_bytes, trial_memory.estimated_bytes),
    measured_bytes  = coalesce(excluded.measured_bytes, trial_memory.measured_bytes))sql"};
static_assert(kComponentCount == 9, "kUpsertMemory has one row per component");

std::optional<std::uint64_t> component_bytes(const MemoryBreakdown* m, Component c) {
    if (!m) return std::nullopt;
    return (*m)[c];
}

}  // namespace

void bind_estimate(Query& q, int first, const std::optional<Estimate>& e) {
    if (!e) {
        for (int i = 0; i < kEstimateColumns; ++i) q.bind(first + i, std::nullopt);
        return;
    }
    q.bind(first, e->memory.peak).bind(first + 1, e->memory.peak_phase).bind(first + 2, e->step_s);
    q.bind(first + 3, e->tokens_per_s).bind(first + 4, e->mfu).bind(first + 5, e->fits);
}

std::optional<Estimate> read_estimate(const Query& q, int first) {
    if (q.is_null(first + 5)) return std::nullopt;
    Estimate e;
    e.memory.peak = q.uint64(first);
    e.memory.peak_phase = q.text(first + 1);
    e.step_s = q.real(first + 2);
    e.tokens_per_s = q.real(first + 3);
    e.mfu = q.real(first + 4);
    e.fits = q.int64(first + 5) != 0;
    return e;
}

void bind_estimate_pace(Query& q, int first, const std::optional<Estimate>& e) {
    const bool priced = e && e->speed_reference_s > 0;
    q.bind(first, priced ? std::optional(e->speed_reference_s) : std::nullopt);
    q.bind(first + 1, e ? std::optional(e->pace_exponent) : std::nullopt);
}

void read_estimate_pace(const Query& q, int first, std::optional<Estimate>& e) {
    if (!e) return;
    if (!q.is_null(first)) e->speed_reference_s = q.real(first);
    if (!q.is_null(first + 1)) e->pace_exponent = q.real(first + 1);
}

namespace {

constexpr Sql kWriteHostEstimate{"write_host_estimate", "UPDATE trials SET est_host_json = ?2 WHERE id = ?1"};
constexpr Sql kWriteHostMeasured{"write_host_measured", "UPDATE trials SET host_json = ?2 WHERE id = ?1"};

}  // namespace

void write_host_estimate(Connection& db, TrialId trial, const std::optional<Estimate>& e) {
    if (!e || (e->host_memory.peak == 0 && e->limit.empty())) return;
    const nlohmann::json j{{"memory", e->host_memory}, {"node_bytes", e->host_node_bytes}, {"limit", e->limit}};
    db.query(kWriteHostEstimate).bind(1, trial).bind(2, j.dump()).run();
}

void write_host_measured(Connection& db, TrialId trial, const TrialResult& r) {
    if (r.rank_host_peaks.empty()) return;
    const nlohmann::json j{{"memory", r.host_memory}, {"rank_peaks", r.rank_host_peaks}};
    db.query(kWriteHostMeasured).bind(1, trial).bind(2, j.dump()).run();
}

void read_host(const Query& q, int first, TrialRecord& rec) {
    try {
        if (!q.is_null(first) && rec.result.estimate) {
            const nlohmann::json j = json_column(q, first, rec.id, "est_host_json");
            rec.result.estimate->host_memory = j.at("memory").get<MemoryBreakdown>();
            rec.result.estimate->host_node_bytes = j.at("node_bytes").get<std::uint64_t>();
            rec.result.estimate->limit = j.at("limit").get<std::string>();
        }
        if (!q.is_null(first + 1)) {
            const nlohmann::json j = json_column(q, first + 1, rec.id, "host_json");
            rec.result.host_memory = j.at("memory").get<MemoryBreakdown>();
            rec.result.rank_host_peaks = j.at("rank_peaks").get<std::vector<std::uint64_t>>();
        }
    } catch (const DamagedRow&) {
        throw;
    } catch (const std::exception& e) {
        damaged_row(rec.id, "est_host_json or host_json", fmt::format("is not a host ledger ({})", e.what()));
    }
}

void write_memory(Connection& db, TrialId trial, const MemoryBreakdown* estimated, const MemoryBreakdown* measured) {
    auto q = db.query(kUpsertMemory);
    q.bind(1, trial);
    int index = 2;
    for (Component c : kComponents) {
        q.bind(index, to_string(c)).bind(index + 1, component_bytes(estimated, c));
        q.bind(index + 2, component_bytes(measured, c));
        index += 3;
    }
    q.run();
}

}  // namespace tune::sql
