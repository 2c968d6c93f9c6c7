// Sizes need units; a limit above the device's memory is a warning; paths in a
// sweep file are relative to it; readers find the database by --sweep-file or TUNE_DB.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "tests/support/run_command.h"
#include "tests/test_store_support.h"

using namespace tune;
using tune::test::run_command;
using tune::test::run_tune;

TEST_CASE("a bare number where a size is expected is an error that says to add a unit", "[units][cli]") {
    const auto best = run_tune("best --max-memory 2.2 --db /nonexistent.db");
    CHECK(best.exit_code == 2);
    CHECK_THAT(best.output, Catch::Contains("--max-memory: 2.2: add a unit, e.g. 2.2GiB"));
    const auto est = run_tune("estimate --model llama-7b --memory-limit 40");
    CHECK(est.exit_code == 2);
    CHECK_THAT(est.output, Catch::Contains("--memory-limit: 40: add a unit, e.g. 40GiB"));
}

TEST_CASE("a memory limit above the device's is a warning", "[units][cli]") {
    const auto over = run_tune("estimate --model llama-7b --device h100-80gb --memory-limit 100GiB");
    CHECK_THAT(over.output,
               Catch::Contains("warning: the memory limit 100.00 GiB is above the h100-80gb device's own"));
    const auto under = run_tune("estimate --model llama-7b --device h100-80gb --memory-limit 40GiB");
    CHECK_THAT(under.output, !Catch::Contains("warning"));
}

TEST_CASE("paths in a sweep file are relative to it, and readers find its database", "[cli][paths]") {
    test::ScratchDir dir;
    std::filesystem::create_directories(dir.file("sweeps"));
    std::ofstream(dir.file("sweeps/s.toml"))
        << "name = \"rel\"\n[model]\npreset = \"tiny\"\n[hardware]\ndevice = \"cpu\"\n"
           "[space]\noptimizer = [\"adamw\"]\n[output]\ndatabase = \"r.db\"\n"
           "report = \"r.html\"\n";
    // Run from another directory: the database and the report land beside the file.
    const std::string in_dir = "cd " + dir.file("") + " && " + TUNE_BINARY + " ";
    REQUIRE(run_command(in_dir + "sweep --dry-run sweeps/s.toml 2>&1").exit_code == 0);
    CHECK(std::filesystem::exists(dir.file("sweeps/r.db")));
    CHECK(std::filesystem::exists(dir.file("sweeps/r.html")));
    CHECK_FALSE(std::filesystem::exists(dir.file("r.db")));
    const auto list = run_command(in_dir + "list --sweep-file sweeps/s.toml 2>&1");
    CHECK(list.exit_code == 0);
    CHECK_THAT(list.output, Catch::Contains("rel"));
    CHECK(run_command(in_dir + "report --format text --sweep-file sweeps/s.toml 2>&1").exit_code == 0);
    // TUNE_DB names the database when neither --db nor --sweep-file does.
    CHECK_THAT(run_command("cd " + dir.file("") + " && TUNE_DB=sweeps/r.db " + TUNE_BINARY + " list 2>&1").output,
               Catch::Contains("rel"));
}
