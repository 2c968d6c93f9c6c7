// How an Estimate and the per-component memory map onto trial columns and
// trial_memory rows; shared by the trial writes, claims and reads (private to store/).
#pragma once

#include <optional>

#include "core/config.h"
#include "store/records.h"
#include "store/sqlite_db.h"

namespace tune::sql {

// Estimate columns, in this order: est_peak_bytes, est_peak_phase, est_step_s,
// est_tokens_per_s, est_mfu, est_fits. Unset binds NULLs.
inline constexpr int kEstimateColumns = 6;
void bind_estimate(Query& q, int first, const std::optional<Estimate>& e);
// nullopt when est_fits is NULL (no estimate was stored). Component bytes are filled from trial_memory.
std::optional<Estimate> read_estimate(const Query& q, int first);

// The estimate's machine pace columns, in this order: est_speed_reference_s (NULL
// for a nominal estimate), est_pace_exponent (core/machine_speed.h). Unset binds NULLs;
// reading leaves an estimate's defaults where a column is NULL (rows before schema 8, 9).
void bind_estimate_pace(Query& q, int first, const std::optional<Estimate>& e);
void read_estimate_pace(const Query& q, int first, std::optional<Estimate>& e);

// Offload's host ledger (schema 12): the estimate's as est_host_json, the measured one as host_json,
// each written only when there is one; reading fills what the row has.
void write_host_estimate(Connection& db, TrialId trial, const std::optional<Estimate>& e);
void write_host_measured(Connection& db, TrialId trial, const TrialResult& r);
void read_host(const Query& q, int first, TrialRecord& rec);

// Upserts one trial_memory row per component; a null side leaves that side as it is.
void write_memory(Connection& db, TrialId trial, const MemoryBreakdown* estimated, const MemoryBreakdown* measured);

}  // namespace tune::sql
