// Starts a program in the background, its output discarded and the given environment
// variables set in the child: how a test runs a driver or a trial it will signal.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

namespace tune::test {

// The child's pid (the caller signals and reaps it); argv[0] is a path, not looked up.
inline pid_t spawn_silenced(const std::vector<std::string>& argv,
                            const std::vector<std::pair<std::string, std::string>>& env = {}) {
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    const pid_t pid = ::fork();
    if (pid == 0) {
        for (const auto& [key, value] : env) ::setenv(key.c_str(), value.c_str(), 1);
        const int null = ::open("/dev/null", O_WRONLY);
        ::dup2(null, STDOUT_FILENO);
        ::dup2(null, STDERR_FILENO);
        ::execv(args[0], args.data());
        ::_exit(127);
    }
    return pid;
}

}  // namespace tune::test
