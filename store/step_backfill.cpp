#include "store/step_backfill.h"

#include <cmath>
#include <limits>
#include <vector>

#include "core/step_statistics.h"
#include "store/sqlite_db.h"

namespace tune {
namespace {

// Step rows in order per trial; a NULL step_ms (an untimed step) reads as NaN, which the statistics skip.
constexpr sql::Sql kMeasuredSteps{"backfill_step_statistics", R"sql(
SELECT t.id, coalesce(json_extract(t.config_json, '$.warmup'), 2), st.step_ms
FROM trials t JOIN trial_steps st ON st.trial_id = t.id
WHERE t.median_step_s IS NOT NULL ORDER BY t.id, st.step)sql"};

// The median stays as it was recorded; the rest is new in version 6.
constexpr sql::Sql kBackfill{"backfill_step_statistics", R"sql(
UPDATE trials SET mean_step_s = ?2, stddev_step_s = ?3, step_cv = ?4, timed_steps = ?5 WHERE id = ?1)sql"};

struct TrialSteps {
    std::int64_t id = 0;
    std::size_t warmup = 0;
    std::vector<double> step_ms;
};

std::vector<TrialSteps> measured_steps(sql::Connection& db) {
    std::vector<TrialSteps> out;
    for (auto q = db.query(kMeasuredSteps); q.step();) {
        if (out.empty() || out.back().id != q.int64(0))
            out.push_back({q.int64(0), static_cast<std::size_t>(q.int64(1)), {}});
        out.back().step_ms.push_back(q.opt_real(2).value_or(std::numeric_limits<double>::quiet_NaN()));
    }
    return out;
}

}  // namespace

void backfill_step_statistics(sql::Connection& db) {
    for (const TrialSteps& t : measured_steps(db)) {
        const StepStatistics s = step_statistics(t.step_ms, t.warmup);
        if (s.count == 0) continue;
        auto q = db.query(kBackfill);
        q.bind(1, t.id).bind(2, s.mean_ms / 1e3).bind(3, s.stddev_ms / 1e3).bind(4, s.cv).bind(5, s.count);
        q.run();
    }
}

}  // namespace tune
