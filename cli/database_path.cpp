#include "cli/database_path.h"

#include <cstdlib>

namespace tune::cli {
namespace {

std::string environment_database() {
    const char* env = std::getenv("TUNE_DB");
    return env && *env ? std::string(env) : std::string("tune.db");
}

}  // namespace

void add_database_flags(CLI::App* cmd, DatabaseFlags& flags) {
    auto* db =
        cmd->add_option("--db", flags.db, "Results database (default: --sweep-file's, else $TUNE_DB, else tune.db)");
    cmd->add_option("--sweep-file", flags.sweep_file,
                    "Read the database this sweep file names ([output] database, relative to the file)")
        ->excludes(db);
}

std::string reader_database(const DatabaseFlags& flags) {
    if (!flags.db.empty()) return flags.db;
    if (!flags.sweep_file.empty()) return sweep_database(load_sweep(flags.sweep_file), "");
    return environment_database();
}

std::string sweep_database(const SweepSpec& spec, const std::string& flag) {
    if (!flag.empty()) return flag;
    if (spec.database_from_file) return spec.database;
    return environment_database();
}

}  // namespace tune::cli
