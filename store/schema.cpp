#include "store/schema.h"

#include <array>
#include <cstdint>
#include <set>
#include <string>

#include <fmt/format.h>

#include "core/config.h"
#include "core/dimensions.h"
#include "store/sqlite_db.h"
#include "store/step_backfill.h"
#include "store/store_error.h"

namespace tune {
namespace {

// Version 1: the first released layout. Step series lived as JSON arrays in `trials`.
constexpr const char* kVersion1 = R"sql(
CREATE TABLE sweeps (
    id            INTEGER PRIMARY KEY,
    name          TEXT NOT NULL UNIQUE,
    spec_text     TEXT NOT NULL,
    spec_hash     TEXT NOT NULL,
    created_at    TEXT NOT NULL,
    host          TEXT NOT NULL DEFAULT '',
    device_name   TEXT NOT NULL DEFAULT '',
    device_count  INTEGER NOT NULL DEFAULT 0,
    device_memory INTEGER NOT NULL DEFAULT 0,
    backend       TEXT NOT NULL DEFAULT '',
    tune_version  TEXT NOT NULL DEFAULT ''
);
CREATE TABLE trials (
    id               INTEGER PRIMARY KEY,
    sweep_id         INTEGER NOT NULL REFERENCES sweeps(id) ON DELETE CASCADE,
    config_hash      TEXT NOT NULL,
    config_json      TEXT NOT NULL,
    model            TEXT NOT NULL,
    optimizer        TEXT NOT NULL,
    precision        TEXT NOT NULL,
    zero_stage       INTEGER NOT NULL,
    grad_accum       INTEGER NOT NULL,
    micro_batch      INTEGER NOT NULL,
    context          INTEGER NOT NULL,
    checkpointing    TEXT NOT NULL,
    world_size       INTEGER NOT NULL,
    status           TEXT NOT NULL CHECK (status IN
                       ('pending', 'running', 'ok', 'oom', 'failed', 'timeout', 'invalid', 'pruned')),
    reason           TEXT NOT NULL DEFAULT '',
    priority         REAL NOT NULL DEFAULT 0,
    est_peak_bytes   INTEGER,
    est_peak_phase   TEXT,
    est_step_s       REAL,
    est_tokens_per_s REAL,
    est_mfu          REAL,
    est_fits         INTEGER,
    peak_bytes       INTEGER,
    peak_phase       TEXT,
    tokens_per_s     REAL,
    step_s           REAL,
    mfu              REAL,
    comm_bytes       INTEGER,
    comm_s           REAL,
    oom_requested    INTEGER,
    oom_live         INTEGER,
    rank_peaks_json  TEXT,
    step_ms_json     TEXT,
    losses_json      TEXT,
    started_at       TEXT,
    ended_at         TEXT,
    UNIQUE (sweep_id, config_hash)
);
CREATE INDEX trials_by_status ON trials (sweep_id, status);
CREATE TABLE trial_memory (
    trial_id        INTEGER NOT NULL REFERENCES trials(id) ON DELETE CASCADE,
    component       TEXT NOT NULL,
    estimated_bytes INTEGER,
    measured_bytes  INTEGER,
    PRIMARY KEY (trial_id, component)
) WITHOUT ROWID;
)sql";

// Version 2: steps become rows (reports query them), provenance and resume columns,
// the claim index and the Pareto front view.
constexpr const char* kVersion2 = R"sql(
ALTER TABLE sweeps ADD COLUMN git_commit     TEXT NOT NULL DEFAULT '';
ALTER TABLE sweeps ADD COLUMN cuda_version   TEXT NOT NULL DEFAULT '';
ALTER TABLE sweeps ADD COLUMN nccl_version   TEXT NOT NULL DEFAULT '';
ALTER TABLE sweeps ADD COLUMN driver_version TEXT NOT NULL DEFAULT '';
ALTER TABLE sweeps ADD COLUMN plan_json      TEXT NOT NULL DEFAULT '{}';

ALTER TABLE trials ADD COLUMN attempts    INTEGER NOT NULL DEFAULT 0;
ALTER TABLE trials ADD COLUMN stderr_tail TEXT NOT NULL DEFAULT '';
ALTER TABLE trials ADD COLUMN step_count  INTEGER NOT NULL DEFAULT 0;
ALTER TABLE trials ADD COLUMN loss_count  INTEGER NOT NULL DEFAULT 0;

CREATE TABLE trial_steps (
    trial_id INTEGER NOT NULL REFERENCES trials(id) ON DELETE CASCADE,
    step     INTEGER NOT NULL,
    step_ms  REAL,
    loss     REAL,
    PRIMARY KEY (trial_id, step)
) WITHOUT ROWID;

INSERT INTO trial_steps (trial_id, step, step_ms)
    SELECT t.id, s.key, s.value FROM trials t, json_each(t.step_ms_json) s WHERE t.step_ms_json IS NOT NULL;
INSERT INTO trial_steps (trial_id, step, loss)
    SELECT t.id, l.key, l.value FROM trials t, json_each(t.losses_json) l WHERE t.losses_json IS NOT NULL
    ON CONFLICT (trial_id, step) DO UPDATE SET loss = excluded.loss;
UPDATE trials SET step_count = coalesce(json_array_length(step_ms_json), 0),
                  loss_count = coalesce(json_array_length(losses_json), 0);
ALTER TABLE trials DROP COLUMN step_ms_json;
ALTER TABLE trials DROP COLUMN losses_json;

-- Serves claims and counts per status; the version-1 index is its prefix, so it goes
-- (one index less to update on every write).
DROP INDEX trials_by_status;
CREATE INDEX trials_claim ON trials (sweep_id, status, priority);

-- Measured ok trials that no other ok trial of the same sweep beats on both peak memory
-- (lower is better) and tokens/s (higher is better).
CREATE VIEW pareto_front AS
SELECT t.* FROM trials t
WHERE t.status = 'ok' AND t.peak_bytes IS NOT NULL AND t.tokens_per_s IS NOT NULL
  AND NOT EXISTS (
      SELECT 1 FROM trials u
      WHERE u.sweep_id = t.sweep_id AND u.status = 'ok'
        AND u.peak_bytes <= t.peak_bytes AND u.tokens_per_s >= t.tokens_per_s
        AND (u.peak_bytes < t.peak_bytes OR u.tokens_per_s > t.tokens_per_s));
)sql";

// Version 3: the same front in O(n log n) instead of comparing every pair of
// trials (seconds at 10,000 trials). Sorted by peak, a trial is on the front
// when it is the fastest at its peak and faster than every trial with a
// strictly smaller peak (peaks are whole bytes, so "1 PRECEDING" means smaller).
constexpr const char* kVersion3 = R"sql(
DROP VIEW pareto_front;
CREATE VIEW pareto_front AS
SELECT * FROM (
    SELECT t.*,
           max(t.tokens_per_s) OVER (PARTITION BY t.sweep_id ORDER BY t.peak_bytes
                                     RANGE BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS front_best_smaller,
           max(t.tokens_per_s) OVER (PARTITION BY t.sweep_id, t.peak_bytes) AS front_best_same
    FROM trials t
    WHERE t.status = 'ok' AND t.peak_bytes IS NOT NULL AND t.tokens_per_s IS NOT NULL)
WHERE tokens_per_s = front_best_same AND (front_best_smaller IS NULL OR tokens_per_s > front_best_smaller);
)sql";

// Version 4: one driver per sweep. A lease names the driver (host, pid) and when it last
// said it was alive (ms since the epoch); a second driver refuses while it is fresh.
constexpr const char* kVersion4 = R"sql(
CREATE TABLE sweep_leases (
    sweep_name   TEXT PRIMARY KEY,
    host         TEXT NOT NULL,
    pid          INTEGER NOT NULL,
    heartbeat_ms INTEGER NOT NULL
) WITHOUT ROWID;
)sql";

// Version 5: what the machine saw beside the tagged peak (the process's or the
// device's real peak, the baseline before the model, the untracked rest; the
// largest over ranks, per rank as JSON), and the probe cache: measured rates
// per host, software version and device, so a sweep probes once.
constexpr const char* kVersion5 = R"sql(
ALTER TABLE trials ADD COLUMN real_peak      INTEGER;
ALTER TABLE trials ADD COLUMN baseline       INTEGER;
ALTER TABLE trials ADD COLUMN untracked      INTEGER;
ALTER TABLE trials ADD COLUMN rank_real_json TEXT;

CREATE TABLE probes (
    host         TEXT NOT NULL,
    software     TEXT NOT NULL,
    device       TEXT NOT NULL,
    probe        TEXT NOT NULL,
    value        REAL NOT NULL,
    unit         TEXT NOT NULL,
    seconds      REAL NOT NULL,
    measured_at  TEXT NOT NULL,
    PRIMARY KEY (host, software, device, probe)
) WITHOUT ROWID;
)sql";

// Version 6: the step-time noise of each trial (Google Benchmark's statistics over the
// timed steps), and one name for the measured median, `median_step_s`, in SQL as in the
// exports. Trials recorded before get their statistics from trial_steps (step_backfill).
constexpr const char* kVersion6 = R"sql(
ALTER TABLE trials RENAME COLUMN step_s TO median_step_s;
ALTER TABLE trials ADD COLUMN mean_step_s   REAL;
ALTER TABLE trials ADD COLUMN stddev_step_s REAL;
ALTER TABLE trials ADD COLUMN step_cv       REAL;
ALTER TABLE trials ADD COLUMN timed_steps   INTEGER;
)sql";

// Version 7: each trial's step-time estimate before any trial fed calibration (the sweep's
// base settings, its probes included), written when the trial is enumerated and never
// re-estimated, beside est_step_s (the calibrated estimate the sweep ran it with): the
// report's accuracy before and after calibration. Trials recorded before have NULL.
constexpr const char* kVersion7 = R"sql(
ALTER TABLE trials ADD COLUMN est_base_step_s REAL;
)sql";

// Version 8: how fast the machine ran. speed_reference_s: the seconds of the speed
// reference (kernels/speed_reference.h) the trial measured before its steps;
// est_speed_reference_s: the one taken with the probes its step-time estimates were
// priced from. Their ratio separates the host's pace from the estimator's error
// (core/machine_speed.h). NULL for trials before, and for estimates without probes.
constexpr const char* kVersion8 = R"sql(
ALTER TABLE trials ADD COLUMN speed_reference_s     REAL;
ALTER TABLE trials ADD COLUMN est_speed_reference_s REAL;
)sql";

// Version 9: est_pace_exponent, how the estimate the trial ran with expected its
// step to follow the machine's pace (Estimate::pace_exponent, learned by
// calibration); NULL (1) for trials before and for those that never ran.
constexpr const char* kVersion9 = R"sql(
ALTER TABLE trials ADD COLUMN est_pace_exponent REAL;
)sql";

// Version 10: the stack a sweep answers for ([framework] name; 'tune' is our engine), and
// each trial's predictions for every stack users train with (estimate/frameworks), as one
// JSON object by stack name; NULL for trials before.
constexpr const char* kVersion10 = R"sql(
ALTER TABLE sweeps ADD COLUMN framework TEXT NOT NULL DEFAULT 'tune';
ALTER TABLE trials ADD COLUMN est_frameworks_json TEXT;
)sql";

// Version 11: which attention a GPU trial ran (cuDNN's graphs or tune's kernels, and why);
// NULL for trials before, and on the CPU.
constexpr const char* kVersion11 = R"sql(
ALTER TABLE trials ADD COLUMN attention TEXT;
)sql";

// Version 12: offload's host ledger (core/offload_plan.h). est_host_json: the estimate's host
// memory per rank by component, per node, and the limit a configuration that does not fit
// passes; host_json: the measured host ledger and every rank's host peak. NULL without offload.
constexpr const char* kVersion12 = R"sql(
ALTER TABLE trials ADD COLUMN est_host_json TEXT;
ALTER TABLE trials ADD COLUMN host_json TEXT;
)sql";

constexpr std::array<const char*, kSchemaVersion> kMigrations{kVersion1, kVersion2,  kVersion3,  kVersion4,
                                                              kVersion5, kVersion6,  kVersion7,  kVersion8,
                                                              kVersion9, kVersion10, kVersion11, kVersion12};

constexpr sql::Sql kUserVersion{"schema_version", "PRAGMA user_version"};
constexpr sql::Sql kTableCount{"schema_tables", "SELECT count(*) FROM sqlite_schema"};
constexpr sql::Sql kOurTables{
    "schema_our_tables", "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name IN ('sweeps', 'trials')"};

constexpr sql::Sql kTrialColumns{"trial_columns", "SELECT name FROM pragma_table_info('trials')"};

// Every search dimension is a column of `trials`, named as in the dimension
// table. Version 1 created the first seven; a dimension added later gets its
// column here, with the value every earlier trial implicitly had as default.
void add_dimension_columns(sql::Connection& db) {
    std::set<std::string> have;
    for (auto q = db.query(kTrialColumns); q.step();) have.insert(q.text(0));
    const TrialConfig before;
    for (const Dimension& d : dimensions()) {
        if (have.contains(std::string(d.name))) continue;
        // Identifiers and defaults come from our own table, never from input.
        const std::string default_value = d.is_enum() ? fmt::format("'{}'", d.text(before)) : d.text(before);
        const std::string alter = fmt::format("ALTER TABLE trials ADD COLUMN {} {} NOT NULL DEFAULT {}", d.name,
                                              d.is_enum() ? "TEXT" : "INTEGER", default_value);
        db.exec("add_dimension_column", alter.c_str());
    }
}

constexpr const char* kForeign = "the file is an SQLite database but not a tune database";

std::int64_t count(sql::Connection& db, const sql::Sql& statement) {
    auto q = db.query(statement);
    q.step();
    return q.int64(0);
}

}  // namespace

int schema_version(sql::Connection& db) {
    auto q = db.query(kUserVersion);
    q.step();
    // user_version is a signed 32-bit header field: any value fits, and check_known judges it.
    return static_cast<int>(q.int64(0));
}

void check_known(sql::Connection& db, int version) {
    // The version indexes kMigrations, so anything outside [0, kSchemaVersion] must stop here,
    // before a single migration or write runs.
    if (version > kSchemaVersion)
        throw StoreError("schema", 0,
                         fmt::format("the database has schema version {}, written by a newer tune; this tune "
                                     "reads versions up to {}",
                                     version, kSchemaVersion),
                         true);
    if (version < 0)
        throw StoreError("schema", 0,
                         fmt::format("the database has schema version {}, which no tune writes: {}", version, kForeign),
                         true);
    if (version == 0 && count(db, kTableCount) != 0) throw StoreError("schema", 0, kForeign, true);
    if (version > 0 && count(db, kOurTables) != 2) throw StoreError("schema", 0, kForeign, true);
}

void migrate(sql::Connection& db) {
    sql::Transaction tx(db);
    const int version = schema_version(db);  // read under the write lock: two openers migrate once
    check_known(db, version);
    for (int v = version; v < kSchemaVersion; ++v) {
        const std::string name = fmt::format("migration to version {}", v + 1);
        db.exec(name.c_str(), kMigrations[static_cast<std::size_t>(v)]);
    }
    if (version < 6) backfill_step_statistics(db);
    add_dimension_columns(db);
    // A pragma takes no bound parameters; the value is our own constant.
    db.exec("set_schema_version", fmt::format("PRAGMA user_version = {}", kSchemaVersion).c_str());
    tx.commit();
}

void check_readable(sql::Connection& db, int version) {
    check_known(db, version);
    if (version == 0) throw StoreError("schema", 0, "the database is empty (no sweep has written to it)", true);
}

}  // namespace tune
