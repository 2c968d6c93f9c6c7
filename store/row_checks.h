// What a row read back must hold: JSON columns that parse to what tune writes
// there, and numbers a measurement or an estimate can have (finite, not
// negative, a model shape within core/validity's bounds). tune never writes
// anything else, so a row that fails was edited or damaged. A trial row is
// refused as a fault of the file (exit 2), naming the trial and the column,
// rather than ranking +inf tokens/s first or printing -1 bytes as 16 EiB; a
// sweep's plan, which only the predicted makespan reads, is left out with a
// warning where it is read, since every other answer still holds without it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "store/records.h"

#include "store/store_error.h"

namespace tune::sql {

class Query;

// A row that fails the checks; the Store names its file when it passes it on.
class DamagedRow : public StoreError {
public:
    explicit DamagedRow(const std::string& message) : StoreError("", 0, message, true) {}
};

// Throws DamagedRow naming the trial and the column.
[[noreturn]] void damaged_row(TrialId id, std::string_view column, std::string_view what);

// The column's JSON, or damaged_row when it does not parse.
nlohmann::json json_column(const Query& q, int column, TrialId id, std::string_view name);

// A column holding bytes or a count: damaged_row when SQLite holds a negative integer there.
std::uint64_t count_column(const Query& q, int column, TrialId id, std::string_view name);

// `j` as the list of byte counts (non-negative integers) tune writes per rank, or damaged_row
// saying the column (or its member `what`) is not one.
std::vector<std::uint64_t> byte_counts(const nlohmann::json& j, TrialId id, std::string_view column,
                                       std::string_view what);

// What a sweep's plan_json holds that tune never writes there, or nullopt. The plan is the driver's
// free-form object; its "makespan" (driver/makespan's prediction, which the reports read) is an
// object of finite, non-negative numbers.
std::optional<std::string> plan_problem(const nlohmann::json& plan);

// Every number of a record read back is one a trial or the estimator can produce.
void check_plausible(const TrialRecord& rec);

}  // namespace tune::sql
