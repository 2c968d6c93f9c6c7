// A report could not be written (the output file, not the data, is the problem).
#pragma once

#include <stdexcept>
#include <string>

namespace tune {

class ReportError : public std::runtime_error {
public:
    explicit ReportError(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace tune
