// The database schema as a list of forward migrations. Version N of the schema
// is what migrations 1..N build; `PRAGMA user_version` says which ran. A new
// database runs them all, so the migration path is exercised on every open.
#pragma once

namespace tune::sql {
class Connection;
}

namespace tune {

inline constexpr int kSchemaVersion = 12;

// Reads PRAGMA user_version.
int schema_version(sql::Connection& db);

// Throws unless `version` is one this tune knows (0 only for an empty file) and the file holds
// tune's tables: a newer, negative or foreign schema is refused before anything runs on it.
void check_known(sql::Connection& db, int version);

// Brings a read-write database up to kSchemaVersion in one transaction. Refuses a
// database written by a newer tune, or a file that is not a tune database.
void migrate(sql::Connection& db);

// Throws unless the database can be read by this tune as it is (version checks only).
void check_readable(sql::Connection& db, int version);

}  // namespace tune
