// The MPI tests' main() owns the process's one MpiRuntime; test cases reach it
// here to build their own MpiComm (a fresh communicator and byte count each).
#pragma once

#include "train/comm/mpi_runtime.h"

namespace tune::test {

const train::MpiRuntime& mpi_runtime();

}  // namespace tune::test
