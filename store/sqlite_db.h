// Thin RAII over the SQLite C API, private to store/ (the only code that
// includes sqlite3.h). Statements are prepared once per connection and cached;
// a Query borrows one, binds parameters by position, steps, and resets it when
// it goes out of scope so no cached statement keeps a read transaction open.
#pragma once

#include <concepts>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include <sqlite3.h>

namespace tune::sql {

// A named SQL text. The name goes into error messages; the text's address keys the cache,
// so every Sql is a constant with static storage.
struct Sql {
    const char* name;
    const char* text;
};

class Query {
public:
    Query(sqlite3* db, sqlite3_stmt* stmt, const char* name) : db_(db), stmt_(stmt), name_(name) {}
    Query(const Query&) = delete;
    Query& operator=(const Query&) = delete;
    ~Query();

    // Parameters are 1-based, as in SQLite. Text is bound with its length, so any bytes
    // (quotes, NUL, invalid UTF-8) are stored verbatim.
    template <std::integral T>
    Query& bind(int index, T value) {
        return bind_int64(index, static_cast<std::int64_t>(value));
    }
    Query& bind(int index, double value);
    Query& bind(int index, std::string_view value);
    Query& bind(int index, const std::string& value) { return bind(index, std::string_view(value)); }
    Query& bind(int index, const char* value) { return bind(index, std::string_view(value)); }
    Query& bind(int index, std::nullopt_t);
    template <typename T>
    Query& bind(int index, const std::optional<T>& value) {
        return value ? bind(index, *value) : bind(index, std::nullopt);
    }

    bool step();  // true while a row is available
    void run();   // executes a statement that returns no rows (or ignores them)

    bool is_null(int column) const;
    std::int64_t int64(int column) const;
    std::uint64_t uint64(int column) const { return static_cast<std::uint64_t>(int64(column)); }
    double real(int column) const;
    std::string text(int column) const;
    std::optional<std::int64_t> opt_int64(int column) const;
    std::optional<double> opt_real(int column) const;

private:
    Query& bind_int64(int index, std::int64_t value);
    void check(int rc) const;

    sqlite3* db_;
    sqlite3_stmt* stmt_;
    const char* name_;
};

class Connection {
public:
    // read_only opens without write access; otherwise the file is created when missing.
    Connection(const std::string& path, bool read_only);
    Connection(const Connection&) = delete;
    Connection& operator=(const Connection&) = delete;
    ~Connection();

    // Statements without parameters (DDL, pragmas, BEGIN/COMMIT); may hold several.
    void exec(const char* name, const char* sql);
    Query query(const Sql& sql);
    std::int64_t last_insert_rowid() const { return sqlite3_last_insert_rowid(db_); }
    int changes() const { return sqlite3_changes(db_); }
    sqlite3* handle() const { return db_; }
    // Folds the write-ahead log into the database as far as readers allow, waiting for none
    // (SQLITE_CHECKPOINT_PASSIVE); best effort: a log it cannot fold now is folded next time.
    void fold_log() { sqlite3_wal_checkpoint_v2(db_, nullptr, SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr); }

private:
    struct Finalize {
        void operator()(sqlite3_stmt* s) const { sqlite3_finalize(s); }
    };
    sqlite3* db_ = nullptr;
    std::unordered_map<const char*, std::unique_ptr<sqlite3_stmt, Finalize>> cache_;
};

// BEGIN IMMEDIATE (takes the write lock up front, so a transaction never fails half-way on
// SQLITE_BUSY) or a deferred read transaction; rolls back unless committed.
class Transaction {
public:
    enum class Kind { write, read };
    explicit Transaction(Connection& db, Kind kind = Kind::write);
    Transaction(const Transaction&) = delete;
    Transaction& operator=(const Transaction&) = delete;
    ~Transaction();
    void commit();

private:
    Connection& db_;
    bool open_ = true;
};

// Throws StoreError with SQLite's message for a failed call.
[[noreturn]] void fail(sqlite3* db, const char* statement, int rc);

}  // namespace tune::sql
