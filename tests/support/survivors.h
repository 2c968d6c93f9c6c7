// Finds processes whose command line contains a marker, by walking /proc: how
// a test checks that nothing a trial started outlived it.
#pragma once

#include <dirent.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace tune::test {

// Live (non-zombie) processes whose NUL-separated argv, joined by spaces, contains `marker`.
inline std::vector<int> processes_with(const std::string& marker) {
    std::vector<int> found;
    DIR* proc = ::opendir("/proc");
    if (!proc) return found;
    while (const dirent* e = ::readdir(proc)) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
        const std::string base = std::string("/proc/") + e->d_name;
        std::ifstream cmd(base + "/cmdline", std::ios::binary);
        std::string argv((std::istreambuf_iterator<char>(cmd)), std::istreambuf_iterator<char>());
        for (char& c : argv) c = c == '\0' ? ' ' : c;
        if (argv.find(marker) == std::string::npos) continue;
        std::ifstream stat(base + "/stat");
        std::string line;
        std::getline(stat, line);
        const auto paren = line.rfind(')');
        if (paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] == 'Z') continue;
        found.push_back(std::atoi(e->d_name));
    }
    ::closedir(proc);
    return found;
}

}  // namespace tune::test
