// The child-process runner the sweep driver isolates trials with.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>

#include "launch/launch.h"
#include "launch/process.h"
#include "tests/support/survivors.h"

using namespace tune;

namespace {
ProcessOutcome sh(const std::string& script, double timeout_s = 10) {
    ProcessSpec spec;
    spec.argv = {"/bin/sh", "-c", script};
    spec.timeout_s = timeout_s;
    return run_process(spec);
}
}  // namespace

TEST_CASE("a child's exit code, stdout and stderr are captured", "[process]") {
    auto r = sh("echo hello; echo oops >&2; exit 3");
    CHECK(r.exit_code == 3);
    CHECK(r.term_signal == 0);
    CHECK(r.stdout_text == "hello\n");
    CHECK(r.stderr_tail == "oops\n");
    CHECK(r.describe() == "exit 3");
}

TEST_CASE("a crash is reported by its signal", "[process]") {
    auto r = sh("kill -ABRT $$");
    CHECK(r.term_signal == SIGABRT);
    CHECK_THAT(r.describe(), Catch::StartsWith("killed by signal 6"));
}

TEST_CASE("a hang is ended at the timeout, grandchildren included", "[process]") {
    const auto start = std::chrono::steady_clock::now();
    auto r = sh("sleep 30 & sleep 30", 0.5);
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    CHECK(r.timed_out);
    CHECK(took < 10);  // generous: the point is that it did not wait 30 s
}

TEST_CASE("a timeout ends descendants that left the child's process group, as MPI ranks do", "[process]") {
    // `set -m` gives each background job its own process group, as OpenMPI does for its ranks:
    // killing the child's group alone would leave these sleeping forever.
    auto r = sh("exec bash -c 'set -m; sleep 987.125 & sleep 987.125 & wait'", 1);
    CHECK(r.timed_out);
    CHECK(test::processes_with("sleep 987.125").empty());
    auto orphaned = sh("bash -c 'set -m; sleep 987.25 & exit 0'; exit 0", 5);
    CHECK(orphaned.exit_code == 0);
    CHECK(test::processes_with("sleep 987.25").empty());
}

TEST_CASE("an orphan holding the pipes does not keep the parent waiting", "[process]") {
    const auto start = std::chrono::steady_clock::now();
    auto r = sh("(sleep 30) & echo done; exit 0", 0);
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    CHECK(r.exit_code == 0);
    CHECK(r.stdout_text == "done\n");
    CHECK(took < 10);
}

TEST_CASE("only the tail of a long stderr is kept", "[process]") {
    ProcessSpec spec;
    spec.argv = {"/bin/sh", "-c", "i=0; while [ $i -lt 2000 ]; do echo line$i >&2; i=$((i+1)); done"};
    spec.stderr_tail_bytes = 100;
    auto r = run_process(spec);
    CHECK(r.stderr_tail.size() == 100);
    CHECK_THAT(r.stderr_tail, Catch::EndsWith("line1999\n"));
}

TEST_CASE("a program that does not exist is reported as not started", "[process]") {
    ProcessSpec spec;
    spec.argv = {"/nonexistent/tune-xyz"};
    auto r = run_process(spec);
    CHECK(r.spawn_failed);
    CHECK_THAT(r.stderr_tail, Catch::Contains("cannot start: /nonexistent/tune-xyz"));
}

TEST_CASE("the first interrupt lets the child finish, the second stops it", "[process]") {
    InterruptWatcher watcher;
    auto send_after = [](int ms) {
        return std::thread([ms] {
            std::this_thread::sleep_for(std::chrono::milliseconds(ms));
            ::kill(::getpid(), SIGINT);
        });
    };
    ProcessSpec spec;
    spec.argv = {"/bin/sh", "-c", "sleep 1; echo finished"};
    spec.interrupts = &watcher;
    auto once = send_after(100);
    auto r1 = run_process(spec);
    once.join();
    CHECK(watcher.count() == 1);
    CHECK_FALSE(r1.interrupted);
    CHECK(r1.stdout_text == "finished\n");

    spec.argv = {"/bin/sh", "-c", "sleep 30"};
    auto twice = send_after(100);
    auto r2 = run_process(spec);
    twice.join();
    CHECK(r2.interrupted);
    CHECK(watcher.count() == 2);
}

TEST_CASE("launchers: auto picks mpirun for several ranks and adds the root flag", "[launch]") {
    CHECK(choose_launcher("auto", 1) == Launcher::local);
    CHECK(choose_launcher("mpirun", 1) == Launcher::local);
    if (!std::getenv("SLURM_JOB_ID")) CHECK(choose_launcher("auto", 4) == Launcher::mpirun);
    CHECK(choose_launcher("srun", 4) == Launcher::srun);
    CHECK_THROWS_WITH(choose_launcher("slurm", 2), Catch::Contains("unknown launcher 'slurm'"));

    const auto argv = launch_command(Launcher::mpirun, 2, {"tune", "trial"});
    CHECK(argv[0] == "mpirun");
    CHECK(argv[2] == "2");
    CHECK(argv.back() == "trial");
    const bool root_flag = std::find(argv.begin(), argv.end(), "--allow-run-as-root") != argv.end();
    CHECK(root_flag == (::geteuid() == 0));
    CHECK(launch_command(Launcher::local, 1, {"tune"}) == std::vector<std::string>{"tune"});
    CHECK(launch_command(Launcher::srun, 8, {"tune"})[1] == "--ntasks=8");
}

TEST_CASE("rank environment comes from OpenMPI's variables", "[launch]") {
    ::setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
    ::setenv("OMPI_COMM_WORLD_RANK", "2", 1);
    ::setenv("OMPI_COMM_WORLD_LOCAL_RANK", "2", 1);
    const RankEnvironment env = rank_environment();
    ::unsetenv("OMPI_COMM_WORLD_SIZE");
    ::unsetenv("OMPI_COMM_WORLD_RANK");
    ::unsetenv("OMPI_COMM_WORLD_LOCAL_RANK");
    CHECK(env.ranks == 4);
    CHECK(env.rank == 2);
    CHECK(env.local_rank == 2);
    CHECK(env.under_launcher);
    CHECK_FALSE(rank_environment().under_launcher);
}

namespace {

// Running and not a zombie waiting to be reaped.
bool alive(pid_t pid) {
    if (::kill(pid, 0) != 0) return false;
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string pid_field, name, state;
    stat >> pid_field >> name >> state;
    return state != "Z";
}

}  // namespace

TEST_CASE("a child outlives no driver: killing the parent with SIGKILL ends its trial", "[process]") {
    const std::string pidfile = "/tmp/tune-test-orphan-" + std::to_string(::getpid());
    std::remove(pidfile.c_str());
    const pid_t driver = ::fork();
    if (driver == 0) {
        ProcessSpec spec;
        spec.argv = {"sh", "-c", "echo $$ > " + pidfile + "; exec sleep 60"};
        (void)run_process(spec);
        _exit(0);
    }
    pid_t trial = 0;
    for (int i = 0; i < 100 && trial == 0; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        std::ifstream in(pidfile);
        in >> trial;
    }
    REQUIRE(trial > 0);
    CHECK(alive(trial));
    ::kill(driver, SIGKILL);
    int status = 0;
    ::waitpid(driver, &status, 0);
    bool gone = false;
    for (int i = 0; i < 100 && !gone; ++i) {  // up to 5 s; it goes at once
        gone = !alive(trial);
        if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (!gone) ::kill(trial, SIGKILL);
    CHECK(gone);
    std::remove(pidfile.c_str());
}
