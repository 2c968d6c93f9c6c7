#include "store/step_columns.h"

#include <optional>

#include "store/sqlite_db.h"

namespace tune::sql {
namespace {

constexpr Sql kWriteStepStatistics{"record_step_statistics", R"sql(
UPDATE trials SET median_step_s = ?2, mean_step_s = ?3, stddev_step_s = ?4, step_cv = ?5, timed_steps = ?6
WHERE id = ?1)sql"};

template <class T>
std::optional<T> if_timed(const StepStatistics& s, T value) {
    return s.count > 0 ? std::optional<T>(value) : std::nullopt;
}

}  // namespace

void write_step_statistics(Connection& db, std::int64_t id, const StepStatistics& s) {
    auto q = db.query(kWriteStepStatistics);
    q.bind(1, id).bind(2, if_timed(s, s.median_ms / 1e3)).bind(3, if_timed(s, s.mean_ms / 1e3));
    q.bind(4, if_timed(s, s.stddev_ms / 1e3)).bind(5, if_timed(s, s.cv)).bind(6, if_timed(s, s.count));
    q.run();
}

void read_step_statistics(const Query& q, int first, TrialRecord& t) {
    t.median_step_s = q.opt_real(first);
    t.mean_step_s = q.opt_real(first + 1);
    t.stddev_step_s = q.opt_real(first + 2);
    t.step_cv = q.opt_real(first + 3);
    t.timed_steps = q.is_null(first + 4) ? 0 : q.uint64(first + 4);
}

}  // namespace tune::sql
