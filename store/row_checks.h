// What a trial row read back must hold: JSON columns that parse to what tune
// writes there, and numbers a measurement or an estimate can have (finite,
// not negative, a model shape within core/validity's bounds). tune never
// writes anything else, so a row that fails was edited or damaged: the reader
// refuses it as a fault of the file (exit 2), naming the trial and the column,
// rather than ranking +inf tokens/s first or printing -1 bytes as 16 EiB.
#pragma once

#include <cstdint>
#include <string_view>

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

// Every number of a record read back is one a trial or the estimator can produce.
void check_plausible(const TrialRecord& rec);

}  // namespace tune::sql
