// Typed error for bad user input: sweep files, flags, JSON configs.
// Carries the source location so the CLI can print `file:line:column: message`.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace tune {

class ConfigError : public std::runtime_error {
public:
    explicit ConfigError(const std::string& message) : std::runtime_error(message) {}
    ConfigError(std::string file, std::uint32_t line, std::uint32_t column, const std::string& message)
        : std::runtime_error(message), file_(std::move(file)), line_(line), column_(column) {}

    const std::string& file() const { return file_; }
    std::uint32_t line() const { return line_; }
    std::uint32_t column() const { return column_; }

    // "sweeps/x.toml:12:5: error: ..." or just the message when no location is known.
    std::string located() const {
        if (file_.empty()) return what();
        std::string out = file_;
        if (line_ > 0) out += ":" + std::to_string(line_) + ":" + std::to_string(column_);
        return out + ": " + what();
    }

private:
    std::string file_;
    std::uint32_t line_ = 0;
    std::uint32_t column_ = 0;
};

}  // namespace tune
