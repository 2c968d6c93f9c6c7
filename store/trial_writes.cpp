// Store: every write to a trial (enumerate, re-estimate, claim, record, release,
// requeue). Each public call is one transaction, so a crash leaves no half-written trial.
#include <algorithm>
#include <array>
#include <string>

#include <fmt/format.h>

#include "core/dimensions.h"
#include "store/sqlite_db.h"
#include "store/step_columns.h"
#include "store/store.h"
#include "store/store_error.h"
#include "store/trial_columns.h"

namespace tune {
namespace {

// The trial row: its fixed columns, then one column per search dimension,
// named as in the dimension table (parameters ?15 onwards, in its order).
constexpr int kBaseStepParameter = 9 + sql::kEstimateColumns;
constexpr int kPaceParameter = kBaseStepParameter + 1;  // two: sql::bind_estimate_pace
constexpr int kFrameworksParameter = kPaceParameter + 2;
constexpr int kFirstDimensionParameter = kFrameworksParameter + 1;
const sql::Sql& insert_trial_sql() {
    static const std::string text = [] {
        std::string columns =
            "sweep_id, config_hash, config_json, model, world_size, status, reason, priority, "
            "est_peak_bytes, est_peak_phase, est_step_s, est_tokens_per_s, est_mfu, est_fits, est_base_step_s, "
            "est_speed_reference_s, est_pace_exponent, est_frameworks_json";
        std::string values = "?1";
        for (const Dimension& d : dimensions()) columns += fmt::format(", {}", d.name);
        for (std::size_t i = 2; i < kFirstDimensionParameter + kDimensionCount; ++i) values += fmt::format(", ?{}", i);
        return fmt::format("INSERT INTO trials ({}) VALUES ({}) ON CONFLICT (sweep_id, config_hash) DO NOTHING",
                           columns, values);
    }();
    static const sql::Sql insert{"insert_trial", text.c_str()};
    return insert;
}

void bind_dimensions(sql::Query& q, const TrialConfig& c) {
    int index = kFirstDimensionParameter;
    for (const Dimension& d : dimensions()) {
        if (d.is_enum())
            q.bind(index++, d.text(c));
        else
            q.bind(index++, d.get(c));
    }
}

// The predictions as their column holds them; NULL when there are none.
std::optional<std::string> frameworks_text(const FrameworkPredictions& p) {
    if (p.empty()) return std::nullopt;
    return nlohmann::json(p).dump();
}

constexpr sql::Sql kUpdatePending{"update_pending", R"sql(
UPDATE trials SET priority = ?2, status = ?3, reason = ?4,
    est_peak_bytes = ?5, est_peak_phase = ?6, est_step_s = ?7, est_tokens_per_s = ?8, est_mfu = ?9, est_fits = ?10,
    est_speed_reference_s = coalesce(?11, est_speed_reference_s), est_pace_exponent = coalesce(?12, est_pace_exponent),
    est_frameworks_json = coalesce(?13, est_frameworks_json)
WHERE id = ?1 AND status = 'pending')sql"};

// One statement per order: ORDER BY cannot be a bound parameter.
#define TUNE_CLAIM_SQL(ORDER)                                                                          \
    "UPDATE trials SET status = 'running', attempts = attempts + 1, started_at = ?2, ended_at = NULL " \
    "WHERE id = (SELECT id FROM trials WHERE sweep_id = ?1 AND status = 'pending' ORDER BY " ORDER     \
    " LIMIT 1) RETURNING id, config_json, attempts, est_peak_bytes, est_peak_phase, est_step_s, "      \
    "est_tokens_per_s, est_mfu, est_fits, est_speed_reference_s, est_pace_exponent, config_hash"
constexpr sql::Sql kClaimByPriority{"claim_next_pending", TUNE_CLAIM_SQL("priority, id")};
constexpr sql::Sql kClaimFastest{"claim_next_pending", TUNE_CLAIM_SQL("est_tokens_per_s DESC NULLS LAST, id")};
constexpr sql::Sql kClaimSmallest{"claim_next_pending", TUNE_CLAIM_SQL("est_peak_bytes ASC NULLS LAST, id")};
#undef TUNE_CLAIM_SQL

constexpr sql::Sql kEstimatedMemory{"read_estimated_memory",
                                    "SELECT component, estimated_bytes FROM trial_memory WHERE trial_id = ?1"};

constexpr sql::Sql kRecordTrial{"record_result", R"sql(
UPDATE trials SET status = ?2, reason = ?3, peak_bytes = ?4, peak_phase = ?5, tokens_per_s = ?6, median_step_s = ?7,
    mfu = ?8, comm_bytes = ?9, comm_s = ?10, oom_requested = ?11, oom_live = ?12, rank_peaks_json = ?13,
    step_count = ?14, loss_count = ?15, started_at = ?16, ended_at = ?17, stderr_tail = ?18,
    est_peak_bytes = coalesce(?19, est_peak_bytes), est_peak_phase = coalesce(?20, est_peak_phase),
    est_step_s = coalesce(?21, est_step_s), est_tokens_per_s = coalesce(?22, est_tokens_per_s),
    est_mfu = coalesce(?23, est_mfu), est_fits = coalesce(?24, est_fits)
WHERE id = ?1)sql"};
constexpr sql::Sql kRecordRealMemory{"record_real_memory", R"sql(
UPDATE trials SET real_peak = ?2, baseline = ?3, untracked = ?4, rank_real_json = ?5 WHERE id = ?1)sql"};
// The machine speed the trial ran at, the one its estimate holds for and how the
// estimate expected the step to follow the difference (core/machine_speed.h).
constexpr sql::Sql kRecordSpeedReference{"record_speed_reference", R"sql(
UPDATE trials SET speed_reference_s = ?2, est_speed_reference_s = coalesce(?3, est_speed_reference_s),
    est_pace_exponent = coalesce(?4, est_pace_exponent) WHERE id = ?1)sql"};
constexpr sql::Sql kRecordAttention{"record_attention", "UPDATE trials SET attention = ?2 WHERE id = ?1"};
constexpr sql::Sql kDeleteSteps{"record_result_steps", "DELETE FROM trial_steps WHERE trial_id = ?1"};
// Steps go in chunks of up to kStepsPerInsert rows per statement: one statement per row
// was a quarter of the time of recording a trial.
constexpr std::size_t kStepsPerInsert = 8;

// INSERT statements for 1..kStepsPerInsert rows: ?1 trial, then (step, step_ms, loss) per row.
const std::array<std::string, kStepsPerInsert>& step_insert_texts() {
    static const auto texts = [] {
        std::array<std::string, kStepsPerInsert> out;
        std::string values;
        for (std::size_t rows = 1; rows <= kStepsPerInsert; ++rows) {
            const std::size_t p = 2 + 3 * (rows - 1);
            values += fmt::format("{}(?1, ?{}, ?{}, ?{})", rows > 1 ? ", " : "", p, p + 1, p + 2);
            out[rows - 1] = "INSERT INTO trial_steps (trial_id, step, step_ms, loss) VALUES " + values;
        }
        return out;
    }();
    return texts;
}

constexpr sql::Sql kRelease{"release", R"sql(
UPDATE trials SET status = 'pending', reason = ?2, attempts = max(attempts - 1, 0)
WHERE id = ?1 AND status = 'running')sql"};
constexpr sql::Sql kGiveUp{"requeue_stale_running", R"sql(
UPDATE trials SET status = 'failed', reason = ?2, ended_at = ?4
WHERE sweep_id = ?1 AND status = 'running' AND attempts >= ?3)sql"};
constexpr sql::Sql kRequeue{"requeue_stale_running",
                            "UPDATE trials SET status = 'pending' WHERE sweep_id = ?1 AND status = 'running'"};

const sql::Sql& claim_sql(ClaimOrder order) {
    switch (order) {
        case ClaimOrder::estimated_fastest:
            return kClaimFastest;
        case ClaimOrder::estimated_smallest:
            return kClaimSmallest;
        case ClaimOrder::priority:
            break;
    }
    return kClaimByPriority;
}

void require(bool ok, const char* statement, const std::string& message) {
    if (!ok) throw StoreError(statement, 0, message);
}

bool is_enumerated_status(TrialStatus s) {
    return s == TrialStatus::pending || s == TrialStatus::invalid || s == TrialStatus::pruned;
}

void insert_steps(sql::Connection& db, TrialId trial, const TrialResult& r) {
    db.query(kDeleteSteps).bind(1, trial).run();
    const std::size_t n = std::max(r.step_ms.size(), r.losses.size());
    for (std::size_t first = 0; first < n; first += kStepsPerInsert) {
        const std::size_t rows = std::min(kStepsPerInsert, n - first);
        auto q = db.query({"record_result_steps", step_insert_texts()[rows - 1].c_str()});
        q.bind(1, trial);
        for (std::size_t k = 0; k < rows; ++k) {
            const std::size_t i = first + k;
            const int p = 2 + 3 * static_cast<int>(k);
            q.bind(p, i);
            q.bind(p + 1, i < r.step_ms.size() ? std::optional(r.step_ms[i]) : std::nullopt);
            q.bind(p + 2, i < r.losses.size() ? std::optional(r.losses[i]) : std::nullopt);
        }
        q.run();
    }
}

}  // namespace

std::size_t Store::add_trials(SweepId sweep, std::span<const NewTrial> trials) {
    sql::Transaction tx(*db_);
    std::size_t added = 0;
    for (const NewTrial& t : trials) {
        require(is_enumerated_status(t.status), "add_trials",
                fmt::format("a new trial is pending, invalid or pruned, not {}", to_string(t.status)));
        const TrialConfig& c = t.config;
        auto q = db_->query(insert_trial_sql());
        q.bind(1, sweep).bind(2, config_hash(c)).bind(3, nlohmann::json(c).dump()).bind(4, c.model.name);
        q.bind(5, c.world_size).bind(6, to_string(t.status)).bind(7, t.reason).bind(8, t.priority);
        sql::bind_estimate(q, 9, t.estimate);
        q.bind(kBaseStepParameter, t.estimate ? std::optional(t.estimate->step_s) : std::nullopt);
        sql::bind_estimate_pace(q, kPaceParameter, t.estimate);
        q.bind(kFrameworksParameter, frameworks_text(t.frameworks));
        bind_dimensions(q, c);
        q.run();
        if (db_->changes() == 0) continue;  // already enumerated: keep what it has
        ++added;
        if (t.estimate) sql::write_memory(*db_, db_->last_insert_rowid(), &t.estimate->memory, nullptr);
        sql::write_host_estimate(*db_, db_->last_insert_rowid(), t.estimate);
    }
    tx.commit();
    return added;
}

void Store::update_pending(std::span<const PendingUpdate> updates) {
    sql::Transaction tx(*db_);
    for (const PendingUpdate& u : updates) {
        require(u.status == TrialStatus::pending || u.status == TrialStatus::pruned, "update_pending",
                fmt::format("a re-estimated trial stays pending or becomes pruned, not {}", to_string(u.status)));
        auto q = db_->query(kUpdatePending);
        q.bind(1, u.id).bind(2, u.priority).bind(3, to_string(u.status)).bind(4, u.reason);
        sql::bind_estimate(q, 5, u.estimate);
        sql::bind_estimate_pace(q, 11, u.estimate);
        q.bind(13, frameworks_text(u.frameworks));
        q.run();
        if (db_->changes() == 0) continue;
        sql::write_memory(*db_, u.id, &u.estimate.memory, nullptr);
        sql::write_host_estimate(*db_, u.id, u.estimate);
    }
    tx.commit();
}

std::optional<ClaimedTrial> Store::claim_next_pending(SweepId sweep, ClaimOrder order) {
    sql::Transaction tx(*db_);
    ClaimedTrial claimed;
    {
        auto q = db_->query(claim_sql(order));
        q.bind(1, sweep).bind(2, format_timestamp(now_timestamp()));
        if (!q.step()) return std::nullopt;
        claimed.id = q.int64(0);
        // The configuration runs as enumerated or not at all: text edited since no longer hashes
        // to the key it was enumerated under (the transaction rolls the claim back).
        if (stable_hash(q.text(1)) != q.text(11))
            throw StoreError("", 0,
                             fmt::format("{}: trial {}: column config_json does not match its config_hash: it was "
                                         "edited after the sweep enumerated it, and tune runs a configuration only "
                                         "as enumerated; restore the database from a copy, or delete the trial "
                                         "(DELETE FROM trials WHERE id = {})",
                                         path_, claimed.id, claimed.id),
                             true);
        const nlohmann::json config = nlohmann::json::parse(q.text(1), nullptr, false);
        try {
            claimed.config = config.get<TrialConfig>();
        } catch (const std::exception& e) {
            throw StoreError("", 0,
                             fmt::format("{}: trial {}: column config_json is not a configuration ({})", path_,
                                         claimed.id, e.what()),
                             true);
        }
        claimed.attempts = static_cast<std::uint32_t>(q.int64(2));
        claimed.estimate = sql::read_estimate(q, 3);
        // The machine speed it was priced at and how calibration expected the step to
        // follow another (core/machine_speed.h): the trial is judged at them.
        sql::read_estimate_pace(q, 9, claimed.estimate);
        q.run();
    }
    if (claimed.estimate) {
        auto q = db_->query(kEstimatedMemory);
        q.bind(1, claimed.id);
        while (q.step())
            if (auto c = parse_component(q.text(0)); c && !q.is_null(1)) claimed.estimate->memory[*c] = q.uint64(1);
    }
    tx.commit();
    return claimed;
}

void Store::record_result(TrialId trial, const TrialResult& r, std::string_view stderr_tail, Timestamp started,
                          Timestamp ended) {
    require(r.status != TrialStatus::pending && r.status != TrialStatus::running, "record_result",
            fmt::format("a recorded result has a final status, not {}", to_string(r.status)));
    const StepStatistics steps = step_statistics(r.step_ms, r.config.warmup);
    sql::Transaction tx(*db_);
    {
        auto q = db_->query(kRecordTrial);
        q.bind(1, trial).bind(2, to_string(r.status)).bind(3, r.reason).bind(4, r.memory.peak);
        const auto median = steps.count ? std::optional(steps.median_ms / 1e3) : std::nullopt;
        q.bind(5, r.memory.peak_phase).bind(6, r.tokens_per_s).bind(7, median).bind(8, r.mfu);
        q.bind(9, r.comm_bytes).bind(10, r.comm_s).bind(11, r.oom_requested).bind(12, r.oom_live);
        q.bind(13, nlohmann::json(r.rank_peaks).dump()).bind(14, r.step_ms.size()).bind(15, r.losses.size());
        q.bind(16, format_timestamp(started)).bind(17, format_timestamp(ended)).bind(18, stderr_tail);
        sql::bind_estimate(q, 19, r.estimate);
        q.run();
    }
    require(db_->changes() == 1, "record_result", fmt::format("no trial with id {}", trial));
    sql::write_step_statistics(*db_, trial, steps);
    if (r.real_peak > 0) {
        const nlohmann::json ranks{
            {"real_peaks", r.rank_real_peaks}, {"baselines", r.rank_baselines}, {"untracked", r.rank_untracked}};
        db_->query(kRecordRealMemory)
            .bind(1, trial)
            .bind(2, r.real_peak)
            .bind(3, r.baseline)
            .bind(4, r.untracked)
            .bind(5, ranks.dump())
            .run();
    }
    if (r.speed_reference_s > 0) {
        auto q = db_->query(kRecordSpeedReference);
        q.bind(1, trial).bind(2, r.speed_reference_s);
        sql::bind_estimate_pace(q, 3, r.estimate);
        q.run();
    }
    if (!r.attention.empty()) db_->query(kRecordAttention).bind(1, trial).bind(2, r.attention).run();
    sql::write_memory(*db_, trial, r.estimate ? &r.estimate->memory : nullptr, &r.memory);
    sql::write_host_estimate(*db_, trial, r.estimate);
    sql::write_host_measured(*db_, trial, r);
    insert_steps(*db_, trial, r);
    tx.commit();
}

void Store::release(std::span<const TrialId> trials, std::string_view reason) {
    sql::Transaction tx(*db_);
    for (TrialId trial : trials) db_->query(kRelease).bind(1, trial).bind(2, reason).run();
    tx.commit();
}

RequeueCounts Store::requeue_stale_running(SweepId sweep) {
    sql::Transaction tx(*db_);
    RequeueCounts counts = requeue_in_transaction(sweep);
    tx.commit();
    return counts;
}

RequeueCounts Store::requeue_in_transaction(SweepId sweep) {
    RequeueCounts counts;
    const std::string reason = fmt::format(
        "abandoned: it was still running when its driver died, {} times (attempts exhausted)", kMaxAttempts);
    db_->query(kGiveUp)
        .bind(1, sweep)
        .bind(2, reason)
        .bind(3, kMaxAttempts)
        .bind(4, format_timestamp(now_timestamp()))
        .run();
    counts.failed = static_cast<std::uint64_t>(db_->changes());
    db_->query(kRequeue).bind(1, sweep).run();
    counts.pending = static_cast<std::uint64_t>(db_->changes());
    return counts;
}

}  // namespace tune
