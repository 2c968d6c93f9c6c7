// Every TEST_CASE is its own ctest entry (catch_discover_tests), whose name
// CMake reads as a list: a ';' splits one test into two that each fail, and a
// name starting with '[' or "--" reads as a Catch tag or option. The names of
// every test source are checked here, before CI runs them.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

namespace fs = std::filesystem;

TEST_CASE("every test name is one ctest entry: no semicolon, no leading tag or option") {
    const std::regex test_case(R"re(TEST_CASE\(\s*"((?:[^"\\]|\\.)*)")re");
    int names = 0;
    for (const auto& entry : fs::recursive_directory_iterator(fs::path(TUNE_SOURCE_DIR) / "tests")) {
        if (!entry.is_regular_file() || entry.path().extension() != ".cpp") continue;
        std::ifstream in(entry.path(), std::ios::binary);
        std::ostringstream text;
        text << in.rdbuf();
        const std::string source = text.str();
        for (std::sregex_iterator it(source.begin(), source.end(), test_case), end; it != end; ++it) {
            const std::string name = (*it)[1];
            INFO(entry.path().filename().string() << ": \"" << name << "\"");
            CHECK(name.find(';') == std::string::npos);
            CHECK_FALSE((name.starts_with("[") || name.starts_with("--")));
            ++names;
        }
    }
    CHECK(names > 500);
}
