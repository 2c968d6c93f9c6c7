// Every rank of a trial ends with it. OpenMPI gives each rank its own process
// group, so killing mpirun's group at a timeout or a second Ctrl-C used to
// leave the ranks running forever.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include "launch/launch.h"
#include "launch/process.h"
#include "tests/support/spawn.h"
#include "tests/support/survivors.h"

using namespace tune;

TEST_CASE("a timed-out mpirun trial leaves no rank behind", "[mpi][launch]") {
    const char* marker = "sleep 987.375";
    ProcessSpec spec;
    spec.argv = launch_command(Launcher::mpirun, 2, {"sleep", "987.375"});
    spec.timeout_s = 3;
    const ProcessOutcome out = run_process(spec);
    CHECK(out.timed_out);
    // SIGKILL is immediate, but give the kernel a moment to tear the processes down.
    for (int i = 0; i < 50 && !test::processes_with(marker).empty(); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    CHECK(test::processes_with(marker).empty());
}

namespace {

// Starts `tune trial` with `ranks` ranks under mpirun (its stdout and stderr discarded) and
// returns its pid; `seed` is on every command line it starts.
pid_t start_trial(std::uint32_t ranks, const std::string& seed) {
    // Steps enough to run for a minute: ranks left behind would still be there when the test looks.
    return test::spawn_silenced({TUNE_BINARY, "trial", "--model", "tiny", "--gpus", std::to_string(ranks), "--steps",
                                 "2000", "--warmup", "1", "--seed", seed});
}

}  // namespace

TEST_CASE("a multi-rank tune trial ended by SIGTERM or SIGKILL while mpirun starts leaves nothing behind",
          "[mpi][launch]") {
    int case_number = 0;
    for (const int signal : {SIGTERM, SIGKILL})
        for (const int delay_ms : {200, 700, 1500}) {
            const std::string seed = std::to_string(9873760 + case_number++);
            // The seed is on every command line: the trial's flags, and mpirun's and the ranks' --config JSON.
            const std::string& marker = seed;
            INFO("signal " << signal << " after " << delay_ms << " ms");
            const pid_t trial = start_trial(8, seed);
            std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
            if (delay_ms >= 1500) CHECK(test::processes_with(marker).size() > 1);  // mpirun and ranks are up
            ::kill(trial, signal);
            ::waitpid(trial, nullptr, 0);
            // mpirun hears of its parent's death (PR_SET_PDEATHSIG) and takes its ranks down; the
            // session sweep does it for a SIGTERM. Allow the ranks a few seconds to go.
            for (int i = 0; i < 750 && !test::processes_with(marker).empty(); ++i)
                std::this_thread::sleep_for(std::chrono::milliseconds(20));
            CHECK(test::processes_with(marker).empty());
        }
}
