#include "store/sqlite_db.h"

#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <filesystem>

#include <fmt/format.h>

#include "core/units.h"
#include "store/store_error.h"

namespace tune::sql {

namespace {

// Codes that describe the file, its directory or its disk rather than a mistake in tune.
bool about_the_file(int primary) {
    switch (primary) {
        case SQLITE_PERM:
        case SQLITE_BUSY:
        case SQLITE_LOCKED:
        case SQLITE_READONLY:
        case SQLITE_IOERR:
        case SQLITE_CORRUPT:
        case SQLITE_FULL:
        case SQLITE_CANTOPEN:
        case SQLITE_NOTADB:
        case SQLITE_AUTH:
            return true;
        default:
            return false;
    }
}

// A full disk: the write-ahead log only checkpoints at ~32 MiB, so a log that grew before the
// disk filled would make every later run fail at once. Roll back, fold the log into the
// database and truncate it, then say where the space ran out and how much is left.
std::string disk_full(sqlite3* db, std::string message) {
    if (!sqlite3_get_autocommit(db)) sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
    sqlite3_wal_checkpoint_v2(db, nullptr, SQLITE_CHECKPOINT_TRUNCATE, nullptr, nullptr);
    const char* name = sqlite3_db_filename(db, "main");
    const std::filesystem::path file = name && *name ? name : "";
    std::filesystem::path dir = file.parent_path();
    if (dir.empty()) dir = ".";
    std::error_code ec;
    const auto space = std::filesystem::space(dir, ec);
    const std::string free_text = ec ? std::string("unknown") : format_bytes(space.available);
    return fmt::format("{} ({}): the disk holding it is full, {} free; free some space and run again", message,
                       file.string(), free_text);
}

}  // namespace

void fail(sqlite3* db, const char* statement, int rc) {
    std::string message = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    // A full disk shows as SQLITE_FULL when a database or log write fails, but as an I/O error
    // (SQLITE_IOERR_SHMSIZE, _WRITE, _TRUNCATE) when growing the -shm file or truncating fails:
    // the OS error says which.
    const int primary = rc & 0xff;
    const bool full = primary == SQLITE_FULL || (primary == SQLITE_IOERR && db && sqlite3_system_errno(db) == ENOSPC);
    if (db && full) message = disk_full(db, std::move(message));
    throw StoreError(statement ? statement : "", rc & 0xff, message, about_the_file(rc & 0xff));
}

// ---------------------------------------------------------------- Query ----

Query::~Query() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
}

void Query::check(int rc) const {
    if (rc != SQLITE_OK) fail(db_, name_, rc);
}

Query& Query::bind_int64(int index, std::int64_t value) {
    check(sqlite3_bind_int64(stmt_, index, value));
    return *this;
}

Query& Query::bind(int index, double value) {
    check(sqlite3_bind_double(stmt_, index, value));
    return *this;
}

Query& Query::bind(int index, std::string_view value) {
    // SQLITE_TRANSIENT: SQLite copies the bytes, so temporaries are safe to bind.
    check(sqlite3_bind_text64(stmt_, index, value.data(), value.size(), SQLITE_TRANSIENT, SQLITE_UTF8));
    return *this;
}

Query& Query::bind(int index, std::nullopt_t) {
    check(sqlite3_bind_null(stmt_, index));
    return *this;
}

bool Query::step() {
    const int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    fail(db_, name_, rc);
}

void Query::run() {
    while (step()) {
    }
}

bool Query::is_null(int column) const { return sqlite3_column_type(stmt_, column) == SQLITE_NULL; }

std::int64_t Query::int64(int column) const { return sqlite3_column_int64(stmt_, column); }

double Query::real(int column) const { return sqlite3_column_double(stmt_, column); }

std::string Query::text(int column) const {
    const auto* bytes = static_cast<const char*>(sqlite3_column_blob(stmt_, column));
    const int size = sqlite3_column_bytes(stmt_, column);
    return bytes ? std::string(bytes, static_cast<std::size_t>(size)) : std::string();
}

std::optional<std::int64_t> Query::opt_int64(int column) const {
    if (is_null(column)) return std::nullopt;
    return int64(column);
}

std::optional<double> Query::opt_real(int column) const {
    if (is_null(column)) return std::nullopt;
    return real(column);
}

// ----------------------------------------------------------- Connection ----

namespace {

// A file: URI for `path`, every byte outside the unreserved set percent-encoded (a path may
// hold '?', '#' or '%', which would otherwise start a query, a fragment or an escape).
std::string file_uri(const std::string& path, const char* query) {
    std::string uri = "file:";
    for (const char c : path) {
        const auto u = static_cast<unsigned char>(c);
        if (std::isalnum(u) || c == '/' || c == '-' || c == '_' || c == '.' || c == '~')
            uri += c;
        else
            uri += fmt::format("%{:02X}", u);
    }
    return uri + "?" + query;
}

sqlite3* open_or_throw(const std::string& path, const std::string& name, int flags, bool read_only) {
    sqlite3* db = nullptr;
    const int rc = sqlite3_open_v2(name.c_str(), &db, flags, nullptr);
    if (rc != SQLITE_OK) {
        std::string message = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
        sqlite3_close(db);
        throw StoreError("open", rc & 0xff,
                         fmt::format("cannot open '{}'{}: {}", path, read_only ? " read-only" : "", message), true);
    }
    sqlite3_extended_result_codes(db, 1);
    return db;
}

// Whether a read-only connection can read the header (a WAL database needs its -shm file,
// which SQLite creates next to it: impossible in a directory nobody may write).
}  // namespace

Connection::Connection(const std::string& path, bool read_only) {
    if (!read_only) {
        db_ = open_or_throw(path, path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, false);
        return;
    }
    // Readers never need write access. Where the directory cannot be written (nobody can be
    // writing the database there, and no -shm can be made) they open it immutable=1, which
    // skips locks and the WAL index; elsewhere a plain read-only open keeps WAL's locking, so
    // a reader never sees a page a writer is changing.
    const int flags = SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX;
    std::filesystem::path dir = std::filesystem::path(path).parent_path();
    if (dir.empty()) dir = ".";
    const bool writable_dir = ::access(dir.c_str(), W_OK) == 0;
    db_ = open_or_throw(path, file_uri(path, writable_dir ? "mode=ro" : "mode=ro&immutable=1"), flags, true);
}

Connection::~Connection() {
    cache_.clear();  // statements first: sqlite3_close refuses while any is alive
    sqlite3_close(db_);
}

void Connection::exec(const char* name, const char* sql) {
    const int rc = sqlite3_exec(db_, sql, nullptr, nullptr, nullptr);
    if (rc != SQLITE_OK) fail(db_, name, rc);
}

Query Connection::query(const Sql& sql) {
    auto& slot = cache_[sql.text];
    if (!slot) {
        sqlite3_stmt* stmt = nullptr;
        const int rc = sqlite3_prepare_v3(db_, sql.text, -1, SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
        if (rc != SQLITE_OK) {
            cache_.erase(sql.text);
            fail(db_, sql.name, rc);
        }
        slot.reset(stmt);
    }
    return Query(db_, slot.get(), sql.name);
}

// ---------------------------------------------------------- Transaction ----

namespace {
constexpr Sql kBeginWrite{"begin", "BEGIN IMMEDIATE"};
constexpr Sql kBeginRead{"begin", "BEGIN DEFERRED"};
constexpr Sql kCommit{"commit", "COMMIT"};
}  // namespace

// Cached statements: one transaction per recorded trial makes their parsing show.
Transaction::Transaction(Connection& db, Kind kind) : db_(db) {
    db_.query(kind == Kind::write ? kBeginWrite : kBeginRead).run();
}

Transaction::~Transaction() {
    if (open_) sqlite3_exec(db_.handle(), "ROLLBACK", nullptr, nullptr, nullptr);
}

void Transaction::commit() {
    db_.query(kCommit).run();
    open_ = false;
}

}  // namespace tune::sql
