// The trial's step-time statistics columns (schema version 6), in seconds:
// median_step_s, mean_step_s, stddev_step_s, step_cv, timed_steps.
#pragma once

#include <cstdint>

#include "core/step_statistics.h"
#include "store/records.h"

namespace tune::sql {

class Connection;
class Query;

// Sets the five columns of trial `id` from statistics in milliseconds (NULL when nothing was timed).
void write_step_statistics(Connection& db, std::int64_t id, const StepStatistics& s);

// The five columns from column `first` on, in the order above.
void read_step_statistics(const Query& q, int first, TrialRecord& t);

}  // namespace tune::sql
