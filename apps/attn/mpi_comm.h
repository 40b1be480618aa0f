// apps/attn/mpi_comm.h — the processes of `mpirun -np N attn train ...`.
//
// attn is an MPI program only when mpirun (or another launcher that sets
// Open MPI's or PMIx's rank variables) started it: then the first call to
// mpi_world() initializes MPI (after main() has blocked SIGINT and SIGTERM,
// so MPI's own threads inherit the mask, signals.h) and returns
// MPI_COMM_WORLD as an optim::Communicator; otherwise it returns nullptr and
// attn runs as one process. A build without MPI (no Open MPI found at
// configure time) refuses to run under mpirun with a clear error rather than
// run N independent copies.
//
// Errors: an error on any process ends every process (MPI_Abort), never a
// hang: a process that reports an error calls mpi_abort_world() before it
// exits, and a process that dies is noticed by mpirun, which ends the rest.
#pragma once

#include <string>

#include "attn/optim/data_parallel.h"

namespace attn::cli {

// Whether a launcher started this process as one of several.
bool launched_by_mpirun();

// MPI_COMM_WORLD under mpirun (initialized on the first call; finalized at
// exit), nullptr otherwise. Error when launched by mpirun but built without MPI.
optim::Communicator* mpi_world();

// The rank of this process (0 without MPI).
int mpi_rank();

// "process 1 of 2: " when a launcher started this process as one of several
// (from the launcher's environment, so also before MPI is initialized), ""
// otherwise: the prefix of its error lines, which say which process failed.
std::string process_label();

// After an error was reported: ends every process of the run (MPI_Abort with
// `code`) when there are several; does nothing otherwise.
void mpi_abort_world(int code);

// For `attn --version`: "MPI: Open MPI v4.1.4 (mpirun -np N attn train: data-parallel)"
// or "MPI: not built in".
std::string mpi_description();

}  // namespace attn::cli
