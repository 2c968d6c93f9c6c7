// Step-time statistics for trials recorded before schema version 6, computed
// from their stored steps by the same rule a trial uses (core/step_statistics).
#pragma once

namespace tune::sql {
class Connection;
}

namespace tune {

// Fills mean_step_s, stddev_step_s, step_cv and timed_steps of every measured trial
// from its trial_steps rows and its configuration's warm-up (median_step_s stays as recorded).
void backfill_step_statistics(sql::Connection& db);

}  // namespace tune
