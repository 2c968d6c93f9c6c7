// Every rank of a trial ends with it. OpenMPI gives each rank its own process
// group, so killing mpirun's group at a timeout or a second Ctrl-C used to
// leave the ranks running forever.
#include <catch2/catch.hpp>

#include <chrono>
#include <thread>

#include "launch/launch.h"
#include "launch/process.h"
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
