// JSON views of store records for `tune best --json`, `tune export --format json`,
// `tune list --json` and the reports. Strings from the database may hold any bytes;
// dump with error_handler_t::replace (see dump_json).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "store/records.h"

namespace tune {

nlohmann::json record_json(const TrialRecord& t);
nlohmann::json sweep_json(const SweepSummary& s);

// Pretty JSON in which invalid UTF-8 from the database becomes U+FFFD instead of an error.
std::string dump_json(const nlohmann::json& j);

}  // namespace tune
