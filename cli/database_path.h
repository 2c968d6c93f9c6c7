// Which results database a command uses. Readers (`best`, `list`, `report`,
// `export`): --db when given, else the database the sweep file --sweep-file
// names, else $TUNE_DB, else tune.db. The sweep: --db, else its file's
// [output] database (relative to the file), else $TUNE_DB, else tune.db.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "sweep/spec.h"

namespace tune::cli {

struct DatabaseFlags {
    std::string db;
    std::string sweep_file;
};

// --db and --sweep-file on a reader command.
void add_database_flags(CLI::App* cmd, DatabaseFlags& flags);

// The path a reader opens.
std::string reader_database(const DatabaseFlags& flags);

// The path a sweep writes (flag: its --db, empty when not given).
std::string sweep_database(const SweepSpec& spec, const std::string& flag);

}  // namespace tune::cli
