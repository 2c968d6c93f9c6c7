// A sweep whose trials are 2 MPI ranks each (`gpus = 2` on the CPU backend):
// the driver starts every trial through mpirun, ZeRO 0-3 all run, every
// rank's peak is recorded and equals the estimate the sweep planned with,
// and collectives move more bytes at stage 3 than at stage 0.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "tests/support/run_command.h"

namespace fs = std::filesystem;
using nlohmann::json;

TEST_CASE("a sweep of 2-rank trials runs ZeRO 0-3 through mpirun and records every rank", "[mpi][launch][e2e]") {
    const fs::path dir = fs::temp_directory_path() / "tune-launch-sweep";
    fs::remove_all(dir);
    fs::create_directories(dir);
    const fs::path file = dir / "ranks.toml";
    std::ofstream(file) << "name = \"ranks\"\n[model]\npreset = \"tiny\"\n[hardware]\ngpus = 2\ndevice = \"cpu\"\n"
                        << "memory_limit = \"2.8MB\"\nmargin = 0.0\n[space]\noptimizer = [\"adamw\", \"adafactor\"]\n"
                        << "precision = \"bf16-mixed\"\nzero_stage = [0, 1, 2, 3]\ncontext = 64\n"
                        << "[trial]\nsteps = 2\nwarmup = 1\ntimeout = \"120s\"\n[output]\ndatabase = \""
                        << (dir / "ranks.db").string() << "\"\nreport = \"" << (dir / "ranks.html").string() << "\"\n";
    const auto run = tune::test::run_tune("sweep " + file.string() + " --no-probe");
    INFO(run.output);
    REQUIRE(run.exit_code == 0);
    CHECK_THAT(run.output, Catch::Contains("8 ok"));

    const auto exported = tune::test::run_tune("export --db " + (dir / "ranks.db").string() + " --format json");
    REQUIRE(exported.exit_code == 0);
    const json trials = json::parse(exported.output.substr(exported.output.find('{')))["trials"];
    REQUIRE(trials.size() == 8);
    std::map<std::pair<std::string, int>, std::uint64_t> comm;
    for (const json& t : trials) {
        INFO(t.dump());
        REQUIRE(t["status"] == "ok");
        CHECK(t["config"]["world_size"] == 2);
        const json& m = t["measured"];
        REQUIRE(m["rank_peaks"].size() == 2);
        for (const json& peak : m["rank_peaks"])
            CHECK(peak.get<std::uint64_t>() <= m["peak_bytes"].get<std::uint64_t>());
        // The sweep's own estimate is recorded: with its margin 0 every configuration fits (the largest
        // peak, 2.72 MB, would not under the 5% default margin of the trial's own estimate).
        CHECK(t["estimate"]["fits"] == true);
        // Above the process baseline (`overhead`, which differs a little between runs and ranks).
        CHECK(t["estimate"]["peak_bytes"].get<std::uint64_t>() -
                  t["estimate"]["memory"]["overhead"].get<std::uint64_t>() ==
              m["peak_bytes"].get<std::uint64_t>() - m["memory"]["overhead"].get<std::uint64_t>());
        comm[{t["config"]["optimizer"].get<std::string>(), t["config"]["zero_stage"].get<int>()}] =
            m["comm_bytes"].get<std::uint64_t>();
    }
    for (const char* o : {"adamw", "adafactor"}) CHECK(comm[{o, 3}] > comm[{o, 0}]);
}

TEST_CASE("a sweep over pipeline_parallel {1, 2} runs both through mpirun, each rank's peak as its stage's estimate",
          "[mpi][launch][e2e][pipeline]") {
    const fs::path dir = fs::temp_directory_path() / "tune-launch-pipeline";
    fs::remove_all(dir);
    fs::create_directories(dir);
    const fs::path file = dir / "pp.toml";
    std::ofstream(file) << "name = \"pp\"\n[model]\npreset = \"tiny\"\n[hardware]\ngpus = 2\ndevice = \"cpu\"\n"
                        << "memory_limit = \"1GiB\"\n[space]\nprecision = \"bf16-mixed\"\ngrad_accum = 2\n"
                        << "pipeline_parallel = [1, 2]\ncontext = 64\n"
                        << "[trial]\nsteps = 2\nwarmup = 1\ntimeout = \"120s\"\n[output]\ndatabase = \""
                        << (dir / "pp.db").string() << "\"\nreport = \"" << (dir / "pp.html").string() << "\"\n";
    const auto run = tune::test::run_tune("sweep " + file.string() + " --no-probe");
    INFO(run.output);
    REQUIRE(run.exit_code == 0);
    CHECK_THAT(run.output, Catch::Contains("2 ok") && Catch::Contains("pp2"));
    const auto exported = tune::test::run_tune("export --db " + (dir / "pp.db").string() + " --format json");
    REQUIRE(exported.exit_code == 0);
    const json trials = json::parse(exported.output.substr(exported.output.find('{')))["trials"];
    REQUIRE(trials.size() == 2);
    for (const json& t : trials) {
        INFO(t.dump());
        REQUIRE(t["status"] == "ok");
        REQUIRE(t["measured"]["rank_peaks"].size() == 2);
        // The recorded estimate is the worst stage's: the largest tagged peak of any rank (each rank's peak less
        // its own process baseline, which differs between ranks).
        const json& m = t["measured"];
        std::uint64_t tagged = 0;
        for (std::size_t r = 0; r < m["rank_peaks"].size(); ++r)
            tagged =
                std::max(tagged, m["rank_peaks"][r].get<std::uint64_t>() - m["rank_baselines"][r].get<std::uint64_t>());
        CHECK(t["estimate"]["peak_bytes"].get<std::uint64_t>() -
                  t["estimate"]["memory"]["overhead"].get<std::uint64_t>() ==
              tagged);
    }
}
