// main() for the tests under mpirun: MPI lives exactly as long as the Catch
// session, and every rank exits with the same status (the worst over ranks),
// so mpirun and ctest see a failure on any rank.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
// The C API only: OpenMPI's C++ bindings (removed in MPI-3) fail -Wextra -Werror.
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#include <mpi.h>

#include <stdexcept>

#include "tests/mpi/mpi_session.h"

namespace tune::test {
namespace {

// Set once by main() before any test runs; tests only read through it.
const train::MpiRuntime* session_runtime = nullptr;

}  // namespace

const train::MpiRuntime& mpi_runtime() {
    if (session_runtime == nullptr) throw std::logic_error("mpi_runtime() used outside the MPI test main");
    return *session_runtime;
}

}  // namespace tune::test

int main(int argc, char* argv[]) {
    const tune::train::MpiRuntime runtime;
    tune::test::session_runtime = &runtime;
    const int failed = Catch::Session().run(argc, argv);
    int worst = 0;
    MPI_Allreduce(&failed, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    tune::test::session_runtime = nullptr;
    return worst == 0 ? 0 : 1;
}
