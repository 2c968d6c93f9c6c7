// Typed errors of the results store.
//
//   StoreError          SQLite said no: carries its message, its result code and
//                       the name of the statement that failed ("claim_next_pending").
//                       `about_the_file()`: the file or the disk is at fault (cannot be
//                       opened, read-only, corrupt, not tune's, disk full), not tune, so
//                       the CLI treats it as bad input.
//   SpecChangedError    a sweep name is reused with a different spec; user input,
//                       so it is a ConfigError (exit code 2 at the CLI).
#pragma once

#include <stdexcept>
#include <string>

#include "core/config_error.h"

namespace tune {

class StoreError : public std::runtime_error {
public:
    StoreError(std::string statement, int code, const std::string& message, bool about_the_file = false)
        : std::runtime_error(statement.empty() ? message : statement + ": " + message),
          statement_(std::move(statement)),
          code_(code),
          about_the_file_(about_the_file) {}

    const std::string& statement() const { return statement_; }
    int code() const { return code_; }  // SQLite's primary result code, 0 when not from SQLite
    bool about_the_file() const { return about_the_file_; }

private:
    std::string statement_;
    int code_ = 0;
    bool about_the_file_ = false;
};

class SpecChangedError : public ConfigError {
public:
    using ConfigError::ConfigError;
};

}  // namespace tune
