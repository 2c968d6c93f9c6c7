// Runs a shell command from a test and captures what it printed.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace tune::test {

struct CommandResult {
    int exit_code = -1;
    std::string output;  // stdout, and stderr when the command redirects it (2>&1)
};

inline CommandResult run_command(const std::string& command) {
    CommandResult result;
    FILE* pipe = ::popen(command.c_str(), "r");
    if (!pipe) return result;
    std::array<char, 4096> buffer{};
    while (std::size_t n = std::fread(buffer.data(), 1, buffer.size(), pipe)) result.output.append(buffer.data(), n);
    const int status = ::pclose(pipe);
    result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return result;
}

// The built `tune` binary with arguments, stderr merged into the output.
inline CommandResult run_tune(const std::string& arguments) {
    return run_command(std::string(TUNE_BINARY) + " " + arguments + " 2>&1");
}

}  // namespace tune::test
