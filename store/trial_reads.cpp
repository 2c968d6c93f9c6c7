// Store: reading trials back as TrialRecords, with their memory rows and step
// series, and the Pareto front view.
#include <cmath>
#include <limits>
#include <unordered_map>

#include <algorithm>

#include <fmt/format.h>

#include "store/row_checks.h"
#include "store/sqlite_db.h"
#include "store/step_columns.h"
#include "store/store.h"
#include "store/store_error.h"
#include "store/trial_columns.h"

namespace tune {
namespace {

#define TUNE_TRIAL_COLUMNS                                                                                          \
    "SELECT t.id, t.sweep_id, s.name, t.config_hash, t.config_json, t.status, t.reason, t.priority, t.attempts, "   \
    "t.est_peak_bytes, t.est_peak_phase, t.est_step_s, t.est_tokens_per_s, t.est_mfu, t.est_fits, "                 \
    "t.peak_bytes, t.peak_phase, t.tokens_per_s, t.median_step_s, t.mfu, t.comm_bytes, t.comm_s, t.oom_requested, " \
    "t.oom_live, t.rank_peaks_json, t.step_count, t.loss_count, t.started_at, t.ended_at, t.stderr_tail, "          \
    "t.real_peak, t.baseline, t.untracked, t.rank_real_json, "                                                      \
    "t.median_step_s, t.mean_step_s, t.stddev_step_s, t.step_cv, t.timed_steps, t.est_base_step_s, "                \
    "t.est_speed_reference_s, t.est_pace_exponent, t.speed_reference_s, t.est_frameworks_json, s.framework, "       \
    "t.attention, t.est_host_json, t.host_json "
// ?1 sweep, ?2 status, ?3 trial id; NULL matches all.
#define TUNE_TRIAL_FILTER \
    "WHERE (?1 IS NULL OR t.sweep_id = ?1) AND (?2 IS NULL OR t.status = ?2) AND (?3 IS NULL OR t.id = ?3)"

constexpr sql::Sql kSelectTrials{"read_trials", TUNE_TRIAL_COLUMNS
                                 "FROM trials t JOIN sweeps s ON s.id = t.sweep_id " TUNE_TRIAL_FILTER
                                 " ORDER BY t.id"};
constexpr sql::Sql kSelectFront{"pareto_front", TUNE_TRIAL_COLUMNS
                                "FROM pareto_front t JOIN sweeps s ON s.id = t.sweep_id " TUNE_TRIAL_FILTER
                                " ORDER BY t.peak_bytes, t.tokens_per_s DESC, t.id"};
constexpr sql::Sql kSelectMemory{"read_trial_memory",
                                 "SELECT m.trial_id, m.component, m.estimated_bytes, m.measured_bytes "
                                 "FROM trial_memory m JOIN trials t ON t.id = m.trial_id " TUNE_TRIAL_FILTER};
constexpr sql::Sql kSelectSteps{"read_trial_steps",
                                "SELECT st.trial_id, st.step, st.step_ms, st.loss "
                                "FROM trial_steps st JOIN trials t ON t.id = st.trial_id " TUNE_TRIAL_FILTER};
#undef TUNE_TRIAL_COLUMNS
#undef TUNE_TRIAL_FILTER

struct Filter {
    std::optional<SweepId> sweep;
    std::optional<TrialStatus> status;
    std::optional<TrialId> id;
};

void bind_filter(sql::Query& q, const Filter& f) {
    q.bind(1, f.sweep);
    q.bind(3, f.id);
    if (f.status)
        q.bind(2, to_string(*f.status));
    else
        q.bind(2, std::nullopt);
}

std::optional<Timestamp> read_time(const sql::Query& q, int column) {
    if (q.is_null(column)) return std::nullopt;
    return parse_timestamp(q.text(column));
}

// real_peak, baseline, untracked, rank_real_json from column `first` on (NULL: not measured).
void read_real_memory(const sql::Query& q, int first, TrialRecord& rec) {
    TrialResult& r = rec.result;
    if (q.is_null(first)) return;
    r.real_peak = sql::count_column(q, first, rec.id, "real_peak");
    r.baseline = sql::count_column(q, first + 1, rec.id, "baseline");
    r.untracked = q.int64(first + 2);
    if (q.is_null(first + 3)) return;
    const nlohmann::json ranks = sql::json_column(q, first + 3, rec.id, "rank_real_json");
    const auto member = [&](const char* key) -> const nlohmann::json& {
        if (!ranks.is_object() || !ranks.contains(key))
            sql::damaged_row(rec.id, "rank_real_json", fmt::format("is not the ranks' memory (no \"{}\")", key));
        return ranks[key];
    };
    r.rank_real_peaks = sql::byte_counts(member("real_peaks"), rec.id, "rank_real_json", "real_peaks");
    r.rank_baselines = sql::byte_counts(member("baselines"), rec.id, "rank_real_json", "baselines");
    const nlohmann::json& untracked = member("untracked");
    // The untracked rest is signed (the real peak less the baseline and the tagged peak), never a fraction.
    if (!untracked.is_array() ||
        !std::all_of(untracked.begin(), untracked.end(), [](const nlohmann::json& v) { return v.is_number_integer(); }))
        sql::damaged_row(rec.id, "rank_real_json", "is not the ranks' memory (untracked is not a list of integers)");
    r.rank_untracked = untracked.get<std::vector<std::int64_t>>();
}

void read_measurement(const sql::Query& q, TrialRecord& rec) {
    TrialResult& r = rec.result;
    rec.measured = !q.is_null(15);
    r.memory.peak = sql::count_column(q, 15, rec.id, "peak_bytes");
    r.memory.peak_phase = q.text(16);
    r.tokens_per_s = q.real(17);
    r.mfu = q.real(19);
    r.comm_bytes = q.uint64(20);
    r.comm_s = q.real(21);
    r.oom_requested = q.uint64(22);
    r.oom_live = q.uint64(23);
    if (!q.is_null(24)) {
        r.rank_peaks =
            sql::byte_counts(sql::json_column(q, 24, rec.id, "rank_peaks_json"), rec.id, "rank_peaks_json", "");
    }
    // NaN is stored as NULL by SQLite; the counts keep the series' lengths.
    constexpr double nan = std::numeric_limits<double>::quiet_NaN();
    r.step_ms.assign(static_cast<std::size_t>(q.int64(25)), nan);
    r.losses.assign(static_cast<std::size_t>(q.int64(26)), nan);
    read_real_memory(q, 30, rec);
    sql::read_step_statistics(q, 34, rec);
}

TrialRecord read_trial(const sql::Query& q) {
    TrialRecord rec;
    rec.id = q.int64(0);
    rec.sweep_id = q.int64(1);
    rec.sweep_name = q.text(2);
    rec.config_hash = q.text(3);
    try {
        rec.result.config = sql::json_column(q, 4, rec.id, "config_json").get<TrialConfig>();
    } catch (const sql::DamagedRow&) {
        throw;
    } catch (const std::exception& e) {
        sql::damaged_row(rec.id, "config_json", fmt::format("is not a configuration ({})", e.what()));
    }
    rec.result.status = parse_status(q.text(5)).value_or(TrialStatus::failed);
    rec.result.reason = q.text(6);
    rec.priority = q.real(7);
    rec.attempts = static_cast<std::uint32_t>(q.int64(8));
    if (!q.is_null(9)) sql::count_column(q, 9, rec.id, "est_peak_bytes");
    rec.result.estimate = sql::read_estimate(q, 9);
    read_measurement(q, rec);
    rec.started_at = read_time(q, 27);
    rec.ended_at = read_time(q, 28);
    rec.stderr_tail = q.text(29);
    if (!q.is_null(39)) rec.base_step_s = q.real(39);
    sql::read_estimate_pace(q, 40, rec.result.estimate);
    if (!q.is_null(42)) rec.result.speed_reference_s = q.real(42);
    if (!q.is_null(43)) rec.frameworks = parse_framework_predictions(q.text(43)).value_or(FrameworkPredictions{});
    rec.sweep_framework = q.text(44);
    if (!q.is_null(45)) rec.result.attention = q.text(45);
    sql::read_host(q, 46, rec);
    sql::check_plausible(rec);
    return rec;
}

using Index = std::unordered_map<TrialId, TrialRecord*>;

void read_memory(sql::Connection& db, const Filter& f, const Index& index) {
    auto q = db.query(kSelectMemory);
    bind_filter(q, f);
    while (q.step()) {
        auto it = index.find(q.int64(0));
        auto component = parse_component(q.text(1));
        if (it == index.end() || !component) continue;
        TrialResult& r = it->second->result;
        if (r.estimate && !q.is_null(2)) r.estimate->memory[*component] = q.uint64(2);
        if (!q.is_null(3)) r.memory[*component] = q.uint64(3);
    }
}

void read_steps(sql::Connection& db, const Filter& f, const Index& index) {
    auto q = db.query(kSelectSteps);
    bind_filter(q, f);
    while (q.step()) {
        auto it = index.find(q.int64(0));
        if (it == index.end()) continue;
        TrialResult& r = it->second->result;
        const auto step = static_cast<std::size_t>(q.int64(1));
        if (step < r.step_ms.size() && !q.is_null(2)) r.step_ms[step] = q.real(2);
        if (step < r.losses.size() && !q.is_null(3)) r.losses[step] = q.real(3);
    }
}

std::vector<TrialRecord> select_trials(const std::string& path, sql::Connection& db, const sql::Sql& sql,
                                       const Filter& f, bool with_memory, bool with_steps) {
    sql::Transaction tx(db, sql::Transaction::Kind::read);  // rows and details from one snapshot
    std::vector<TrialRecord> out;
    {
        auto q = db.query(sql);
        bind_filter(q, f);
        try {
            while (q.step()) out.push_back(read_trial(q));
        } catch (const sql::DamagedRow& e) {
            throw StoreError("", 0, fmt::format("{}: {}", path, e.what()), true);
        }
    }
    Index index;
    for (auto& rec : out) index.emplace(rec.id, &rec);
    if (with_memory) read_memory(db, f, index);
    if (with_steps) read_steps(db, f, index);
    if (!with_steps) {
        for (auto& rec : out) {
            rec.result.step_ms.clear();
            rec.result.losses.clear();
        }
    }
    return out;
}

}  // namespace

std::vector<TrialRecord> Store::trials(const TrialQuery& query) const {
    return select_trials(path_, *db_, kSelectTrials, {query.sweep, query.status, std::nullopt}, query.with_memory,
                         query.with_steps);
}

std::optional<TrialRecord> Store::trial(TrialId id) const {
    auto found = select_trials(path_, *db_, kSelectTrials, {std::nullopt, std::nullopt, id}, true, true);
    if (found.empty()) return std::nullopt;
    return std::move(found.front());
}

std::vector<TrialRecord> Store::pareto_front(SweepId sweep) const {
    return select_trials(path_, *db_, kSelectFront, {sweep, std::nullopt, std::nullopt}, true, false);
}

}  // namespace tune
