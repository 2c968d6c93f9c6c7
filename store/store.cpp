#include "store/store.h"

#include <filesystem>

#include <fmt/format.h>

#include "store/schema.h"
#include "store/sqlite_db.h"

namespace tune {
namespace {

// Long enough to outwait any single write transaction of the driver.
constexpr int kBusyTimeoutMs = 10000;

void configure(sql::Connection& db, bool read_only) {
    db.exec("foreign_keys", "PRAGMA foreign_keys = ON");
    if (read_only) return;
    // WAL lets readers work while the driver writes; NORMAL sync keeps every commit
    // atomic across process crashes (only an OS crash may lose the last commits).
    db.exec("journal_mode", "PRAGMA journal_mode = WAL");
    db.exec("synchronous", "PRAGMA synchronous = NORMAL");
    // Checkpoints (the only fsyncs under NORMAL) every ~32 MiB of log instead of 4 MiB:
    // hot pages are copied back once per checkpoint, so fewer checkpoints write less.
    db.exec("wal_autocheckpoint", "PRAGMA wal_autocheckpoint = 8000");
}

// A reader must not write the file, so an older schema is migrated in a private copy.
std::unique_ptr<sql::Connection> migrated_copy(sql::Connection& source) {
    auto copy = std::make_unique<sql::Connection>(":memory:", false);
    sqlite3_backup* backup = sqlite3_backup_init(copy->handle(), "main", source.handle(), "main");
    if (!backup) sql::fail(copy->handle(), "copy_for_migration", sqlite3_errcode(copy->handle()));
    sqlite3_backup_step(backup, -1);
    const int rc = sqlite3_backup_finish(backup);
    if (rc != SQLITE_OK) sql::fail(copy->handle(), "copy_for_migration", rc);
    sqlite3_busy_timeout(copy->handle(), kBusyTimeoutMs);
    copy->exec("foreign_keys", "PRAGMA foreign_keys = ON");
    migrate(*copy);
    return copy;
}

}  // namespace

Store::Store(const std::string& path, Mode mode) : path_(path) {
    const bool read_only = mode == Mode::read_only;
    db_ = std::make_unique<sql::Connection>(path, read_only);
    // Before the first read: an opener can find the log being recovered by another
    // (WAL's recovery after the last connection closed), and must wait, not fail.
    sqlite3_busy_timeout(db_->handle(), kBusyTimeoutMs);
    // Judge the file before configure() switches it to WAL (a write) or a migration runs.
    check_known(*db_, tune::schema_version(*db_));
    configure(*db_, read_only);
    if (!read_only) {
        migrate(*db_);
        // A log left by a run that died or filled the disk is folded back now, not at ~32 MiB:
        // after space is freed, a resume must not keep growing the log beside a stale file.
        db_->fold_log();
        return;
    }
    const int version = tune::schema_version(*db_);
    check_readable(*db_, version);
    if (version < kSchemaVersion) db_ = migrated_copy(*db_);
}

Store::Store(Store&&) noexcept = default;
Store& Store::operator=(Store&&) noexcept = default;
Store::~Store() = default;

Store Store::open_reader(const std::string& path) {
    if (!std::filesystem::exists(path))
        throw ConfigError(fmt::format("no results database at '{}': pass --db FILE, or run a sweep first", path));
    return Store(path, Mode::read_only);
}

int Store::schema_version() const { return tune::schema_version(*db_); }

std::string Store::check_integrity() const {
    static constexpr sql::Sql kIntegrity{"integrity_check", "PRAGMA integrity_check"};
    static constexpr sql::Sql kForeignKeys{"foreign_key_check", "PRAGMA foreign_key_check"};
    std::string problems;
    {
        auto q = db_->query(kIntegrity);
        while (q.step())
            if (q.text(0) != "ok") problems += q.text(0) + "\n";
    }
    auto q = db_->query(kForeignKeys);
    while (q.step()) problems += fmt::format("{} row {} has no parent in {}\n", q.text(0), q.int64(1), q.text(2));
    return problems.empty() ? "ok" : problems;
}

}  // namespace tune
