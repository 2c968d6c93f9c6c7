// `--emit FRAMEWORK` on `tune best` and `tune export --trial N`: the chosen
// configuration written for a framework (exports/framework.h).
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "core/config.h"

namespace tune::cli {

// Adds --emit with its choices; `target` stays empty when not given.
CLI::Option* add_emit_flag(CLI::App* cmd, std::string& target);

// Prints the export of `c`: the file on stdout, the notes on stderr (JSON) or
// as comments in it (YAML, shell). `chosen` says which trial it is and on what basis.
void print_emit(const std::string& framework, const TrialConfig& c, const std::string& chosen);

}  // namespace tune::cli
