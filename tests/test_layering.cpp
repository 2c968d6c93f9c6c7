// The layering table in docs/architecture.md is the rule; this test reads it
// and every quoted include of the tree, so the table and the code cannot drift.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

const fs::path kRoot = TUNE_SOURCE_DIR;

std::string read_text(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream out;
    out << in.rdbuf();
    return out.str();
}

// folder -> folders it may include, from the rows "| `core/` | lib | `a/`, `b/` | holds |".
std::map<std::string, std::set<std::string>> layering_table() {
    std::map<std::string, std::set<std::string>> allowed;
    std::istringstream doc(read_text(kRoot / "docs/architecture.md"));
    const std::regex row(R"(^\| `([a-z]+)/` \| [^|]+ \| ([^|]+) \|)");
    const std::regex folder("`([a-z]+)/`");
    bool in_section = false;
    for (std::string line; std::getline(doc, line);) {
        if (line.starts_with("### Layering"))
            in_section = true;
        else if (line.starts_with("#"))
            in_section = false;
        std::smatch m;
        if (!in_section || !std::regex_search(line, m, row)) continue;
        std::set<std::string>& may = allowed[m[1]];
        const std::string cell = m[2];
        for (std::sregex_iterator it(cell.begin(), cell.end(), folder), end; it != end; ++it) may.insert((*it)[1]);
    }
    return allowed;
}

bool is_source(const fs::path& p) {
    static const std::set<std::string> kinds{".h", ".cpp", ".cu", ".cuh"};
    return kinds.contains(p.extension().string());
}

}  // namespace

namespace {

// The library folders are the top-level folders with a CMakeLists.txt of their own.
std::vector<std::string> library_folders() {
    std::vector<std::string> folders;
    for (const auto& entry : fs::directory_iterator(kRoot)) {
        const std::string name = entry.path().filename().string();
        if (entry.is_directory() && name != "tests" && name != "build" && fs::exists(entry.path() / "CMakeLists.txt"))
            folders.push_back(name);
    }
    return folders;
}

}  // namespace

TEST_CASE("the layering table names every library folder") {
    const auto table = layering_table();
    const auto folders = library_folders();
    CHECK(folders.size() >= 12);
    for (const std::string& folder : folders) {
        INFO(folder);
        CHECK(table.contains(folder));
    }
    // The trainer is train/, the estimator estimate/ and the sweep file sweep/.
    for (const char* gone : {"harness", "search"}) {
        INFO(gone);
        CHECK_FALSE(table.contains(gone));
        CHECK_FALSE(fs::exists(kRoot / gone / "CMakeLists.txt"));
    }
}

TEST_CASE("no include runs against docs/architecture.md's layering table") {
    const auto table = layering_table();
    REQUIRE(table.size() >= 9);
    const std::regex include_line(R"re(#\s*include\s+"([a-z_]+)/)re");
    std::vector<std::string> violations;
    std::size_t checked = 0;
    for (const auto& [folder, may] : table) {
        if (folder == "tests" || !fs::is_directory(kRoot / folder)) continue;
        for (const auto& entry : fs::recursive_directory_iterator(kRoot / folder)) {
            if (!entry.is_regular_file() || !is_source(entry.path())) continue;
            std::istringstream text(read_text(entry.path()));
            int line_no = 0;
            for (std::string line; std::getline(text, line);) {
                ++line_no;
                std::smatch m;
                if (!std::regex_search(line, m, include_line)) continue;
                ++checked;
                const std::string target = m[1];
                if (target == folder || may.contains(target) || !table.contains(target)) continue;
                violations.push_back(fs::relative(entry.path(), kRoot).string() + ":" + std::to_string(line_no) +
                                     " includes " + target + "/ (allowed: " + folder + "/ and its row)");
            }
        }
    }
    CHECK(checked > 200);
    for (const auto& v : violations) FAIL_CHECK(v);
}

TEST_CASE("every source file of a library folder is in its CMakeLists.txt") {
    // Explicit source lists: a file that is not listed is dead code or a forgotten edit.
    for (const std::string& folder : library_folders()) {
        const fs::path dir = kRoot / folder;
        const std::string cmake = read_text(dir / "CMakeLists.txt");
        for (const auto& entry : fs::recursive_directory_iterator(dir)) {
            const auto ext = entry.path().extension();
            if (!entry.is_regular_file() || (ext != ".cpp" && ext != ".cu")) continue;
            const std::string rel = fs::relative(entry.path(), dir).generic_string();
            INFO(folder << "/" << rel);
            CHECK(cmake.find(rel) != std::string::npos);
        }
    }
}
