#include "store/trial_columns.h"

namespace tune::sql {
namespace {

constexpr Sql kUpsertMemory{"write_trial_memory", R"sql(
INSERT INTO trial_memory (trial_id, component, estimated_bytes, measured_bytes) VALUES (?1, ?2, ?3, ?4)
ON CONFLICT (trial_id, component) DO UPDATE SET
    estimated_bytes = coalesce(excluded.estimated_bytes, trial_memory.estimated_bytes),
    measured_bytes  = coalesce(excluded.measured_bytes, trial_memory.measured_bytes))sql"};

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

void write_memory(Connection& db, TrialId trial, const MemoryBreakdown* estimated, const MemoryBreakdown* measured) {
    for (Component c : kComponents) {
        auto q = db.query(kUpsertMemory);
        q.bind(1, trial).bind(2, to_string(c)).bind(3, component_bytes(estimated, c));
        q.bind(4, component_bytes(measured, c)).run();
    }
}

}  // namespace tune::sql
