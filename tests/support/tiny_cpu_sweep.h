// A small sweep file: tests/support/tiny_cpu_sweep.toml's model and hardware
// (the tiny model on the CPU, 1 GiB per rank) under `name`, then `tables`
// ([space], [trial], ...). scripts/bench_driver.sh reads the same file.
#pragma once

#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>

namespace tune::test {

inline std::string tiny_cpu_sweep(std::string_view name, std::string_view tables) {
    const std::string path = std::string(TUNE_SOURCE_DIR) + "/tests/support/tiny_cpu_sweep.toml";
    std::ifstream in(path);
    if (!in) throw std::runtime_error("cannot read " + path);
    std::ostringstream text;
    text << "name = \"" << name << "\"\n" << in.rdbuf() << tables;
    return text.str();
}

}  // namespace tune::test
