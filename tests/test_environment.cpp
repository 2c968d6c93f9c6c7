// Numbers from the environment are read strictly (core/environment.h), and every TUNE_* variable
// the code reads is in docs/commands.md's table.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "core/config_error.h"
#include "core/environment.h"

using namespace tune;

namespace {

// Sets a variable for one test and restores its absence after.
class ScopedVariable {
public:
    ScopedVariable(const char* name, const char* value) : name_(name) { ::setenv(name, value, 1); }
    ~ScopedVariable() { ::unsetenv(name_); }
    ScopedVariable(const ScopedVariable&) = delete;
    ScopedVariable& operator=(const ScopedVariable&) = delete;

private:
    const char* name_;
};

constexpr const char* kName = "TUNE_TEST_ENVIRONMENT_NUMBER";

}  // namespace

TEST_CASE("an environment number is absent when unset or empty and whole when it is one") {
    ::unsetenv(kName);
    CHECK_FALSE(environment_integer(kName, 0, 10));
    {
        ScopedVariable empty(kName, "");
        CHECK_FALSE(environment_integer(kName, 0, 10));
    }
    ScopedVariable four(kName, "4");
    CHECK(environment_integer(kName, 0, 10) == 4);
    CHECK(environment_number(kName, 0, 10) == 4.0);
}

TEST_CASE("an environment number with junk, out of range, negative or overflowing is refused naming the variable") {
    for (const char* bad : {"4x", "x4", " 4", "4 ", "2(x3)", "-1", "11", "99999999999999999999999", "1e3", "nan"}) {
        ScopedVariable v(kName, bad);
        INFO(bad);
        CHECK_THROWS_AS(environment_integer(kName, 0, 10), ConfigError);
        CHECK_THROWS_WITH(environment_integer(kName, 0, 10), Catch::Contains(kName) && Catch::Contains(bad));
    }
    for (const char* bad : {"nan", "inf", "-inf", "0.5s", "1e400", "-0.1"}) {
        ScopedVariable v(kName, bad);
        INFO(bad);
        CHECK_THROWS_WITH(environment_number(kName, 0, 10), Catch::Contains(kName));
    }
    ScopedVariable half(kName, "0.5");
    CHECK(environment_number(kName, 0, 10) == 0.5);
}

TEST_CASE("every TUNE_* variable the code reads is in docs/commands.md's table of environment variables") {
    namespace fs = std::filesystem;
    const fs::path root = TUNE_SOURCE_DIR;
    std::ifstream doc_file(root / "docs/commands.md");
    std::stringstream doc;
    doc << doc_file.rdbuf();
    const std::string text = doc.str();
    const std::size_t table = text.find("## Environment variables");
    REQUIRE(table != std::string::npos);
    const std::string section = text.substr(table, text.find("\n## ", table + 1) - table);
    const std::regex name("\"(TUNE_[A-Z0-9_]+)\"");
    std::set<std::string> read;
    for (const auto& entry : fs::recursive_directory_iterator(root)) {
        const fs::path rel = fs::relative(entry.path(), root);
        const std::string top = rel.begin()->string();
        const std::string ext = entry.path().extension().string();
        if (!entry.is_regular_file() || top == "tests" || top == "build" || top.starts_with(".") ||
            (ext != ".cpp" && ext != ".h" && ext != ".cu"))
            continue;
        std::ifstream in(entry.path());
        for (std::string line; std::getline(in, line);)
            if (line.find("getenv") != std::string::npos || line.find("environment_") != std::string::npos ||
                line.find("Variable =") != std::string::npos)
                for (std::sregex_iterator it(line.begin(), line.end(), name), end; it != end; ++it)
                    read.insert((*it)[1]);
    }
    CHECK(read.size() >= 7);
    for (const std::string& v : read) {
        INFO(v);
        CHECK(section.find("`" + v + "`") != std::string::npos);
    }
}
