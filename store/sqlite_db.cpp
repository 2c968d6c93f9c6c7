#include "store/sqlite_db.h"

#include <fmt/format.h>

#include "store/store_error.h"

namespace tune::sql {

void fail(sqlite3* db, const char* statement, int rc) {
    std::string message = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    throw StoreError(statement ? statement : "", rc & 0xff, message);
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

Connection::Connection(const std::string& path, bool read_only) {
    const int flags = (read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) |
                      SQLITE_OPEN_NOMUTEX;
    const int rc = sqlite3_open_v2(path.c_str(), &db_, flags, nullptr);
    if (rc != SQLITE_OK) {
        std::string message = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
        sqlite3_close(db_);
        db_ = nullptr;
        throw StoreError("open", rc & 0xff, fmt::format("cannot open '{}'{}: {}", path, read_only ? " read-only" : "", message));
    }
    sqlite3_extended_result_codes(db_, 1);
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
Transaction::Transaction(Connection& db, Kind kind) : db_(db) { db_.query(kind == Kind::write ? kBeginWrite : kBeginRead).run(); }

Transaction::~Transaction() {
    if (open_) sqlite3_exec(db_.handle(), "ROLLBACK", nullptr, nullptr, nullptr);
}

void Transaction::commit() {
    db_.query(kCommit).run();
    open_ = false;
}

}  // namespace tune::sql
