// Scratch files for the report tests: one fresh directory per test process
// (ctest runs test cases in parallel), with the fixture database written into it.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/support/report_fixture.h"

namespace tune::test {

inline std::filesystem::path report_scratch_dir(const std::string& tag) {
    const auto dir = std::filesystem::path(TUNE_BUILD_DIR) / "test-report" / (tag + "-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    return dir;
}

// A fresh copy of the standard fixture (h100-demo, a100-demo, the hostile sweep).
inline std::string report_fixture_db(const std::filesystem::path& dir) {
    const std::string path = (dir / "fixture.db").string();
    write_report_fixture(path);
    return path;
}

inline std::string read_text_file(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream out;
    out << in.rdbuf();
    return out.str();
}

// Occurrences of `needle` in `text`.
inline std::size_t count_of(const std::string& text, const std::string& needle) {
    std::size_t n = 0;
    for (std::size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + needle.size())) ++n;
    return n;
}

}  // namespace tune::test
