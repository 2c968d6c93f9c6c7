#include "store/row_checks.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include <fmt/format.h>

#include "core/validity.h"
#include "store/sqlite_db.h"
#include "store/store_error.h"

namespace tune::sql {
namespace {

void check_rate(TrialId id, std::string_view column, double value) {
    if (!std::isfinite(value) || value < 0)
        damaged_row(id, column, fmt::format("holds {}, which no trial or estimate produces", value));
}

void check_rate(TrialId id, std::string_view column, const std::optional<double>& value) {
    if (value) check_rate(id, column, *value);
}

// Shapes a sweep file or `tune trial` accepts: what enumeration could have written.
void check_config(TrialId id, const TrialConfig& c) {
    if (const auto problem = model_problem(c.model))
        damaged_row(id, "config_json", fmt::format("holds a model tune refuses ({})", problem->reason));
    const bool in_range = c.world_size >= 1 && c.world_size <= kMaxWorldSize && c.micro_batch >= 1 &&
                          c.micro_batch <= kMaxMicroBatch && c.grad_accum >= 1 && c.grad_accum <= kMaxGradAccum &&
                          c.context >= 1 && c.context <= kMaxContext;
    if (!in_range)
        damaged_row(id, "config_json",
                    fmt::format("holds world size {}, micro-batch {}, accumulation {}, context {}: out of range",
                                c.world_size, c.micro_batch, c.grad_accum, c.context));
}

}  // namespace

void damaged_row(TrialId id, std::string_view column, std::string_view what) {
    throw DamagedRow(
        fmt::format("trial {}: column {} {}; tune never writes that, so the database was edited or "
                    "damaged: restore it from a copy, or delete the trial (DELETE FROM trials WHERE "
                    "id = {})",
                    id, column, what, id));
}

nlohmann::json json_column(const Query& q, int column, TrialId id, std::string_view name) {
    nlohmann::json j = nlohmann::json::parse(q.text(column), nullptr, false);
    if (j.is_discarded()) damaged_row(id, name, "is not JSON");
    return j;
}

std::uint64_t count_column(const Query& q, int column, TrialId id, std::string_view name) {
    const std::int64_t value = q.int64(column);
    if (value < 0) damaged_row(id, name, fmt::format("holds {}, which no count of bytes or steps is", value));
    return static_cast<std::uint64_t>(value);
}

std::vector<std::uint64_t> byte_counts(const nlohmann::json& j, TrialId id, std::string_view column,
                                       std::string_view what) {
    const bool counts =
        j.is_array() && std::all_of(j.begin(), j.end(), [](const nlohmann::json& v) { return v.is_number_unsigned(); });
    if (!counts)
        damaged_row(id, column,
                    what.empty() ? std::string("is not a list of byte counts")
                                 : fmt::format("is not the ranks' memory ({} is not a list of byte counts)", what));
    return j.get<std::vector<std::uint64_t>>();
}

std::optional<std::string> plan_problem(const nlohmann::json& plan) {
    if (!plan.is_object()) return fmt::format("holds {}, not an object", plan.type_name());
    if (!plan.contains("makespan")) return std::nullopt;
    const nlohmann::json& makespan = plan["makespan"];
    if (!makespan.is_object()) return fmt::format("holds {} as \"makespan\", not an object", makespan.type_name());
    // Keys are the database's text: {:?} escapes them for the terminal, as dump() does values.
    for (const auto& [key, v] : makespan.items())
        if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0)
            return fmt::format("holds {} as \"makespan\".{:?}, not a finite, non-negative number", v.dump(), key);
    return std::nullopt;
}

void check_plausible(const TrialRecord& rec) {
    const TrialResult& r = rec.result;
    check_config(rec.id, r.config);
    check_rate(rec.id, "tokens_per_s", r.tokens_per_s);
    check_rate(rec.id, "mfu", r.mfu);
    check_rate(rec.id, "comm_s", r.comm_s);
    check_rate(rec.id, "median_step_s", rec.median_step_s);
    check_rate(rec.id, "mean_step_s", rec.mean_step_s);
    check_rate(rec.id, "stddev_step_s", rec.stddev_step_s);
    if (!r.estimate) return;
    check_rate(rec.id, "est_step_s", r.estimate->step_s);
    check_rate(rec.id, "est_tokens_per_s", r.estimate->tokens_per_s);
    check_rate(rec.id, "est_mfu", r.estimate->mfu);
}

}  // namespace tune::sql
