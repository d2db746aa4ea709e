/* mpi_publish_lookup: rank 0 publishes a service name (MPI_Publish_name), every rank looks it up
 * (MPI_Lookup_name) after a barrier, which is no PMIx fence, so the name must reach the other
 * nodes without one; then rank 0 withdraws it (MPI_Unpublish_name). Every rank prints what it
 * found; exits 1 when a lookup fails or finds something else. Built by mpi_direct_test.sh with
 * OpenMPI's mpicc and run by direct launch (PMIx_Publish/Lookup served by trainlet-pmix). */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  const char* service = "trainlet-test-service";
  char want[MPI_MAX_PORT_NAME];
  snprintf(want, sizeof want, "trainlet-port-of-rank-0");
  if (rank == 0) {
    int rc = MPI_Publish_name(service, MPI_INFO_NULL, want);
    if (rc != MPI_SUCCESS) {
      fprintf(stderr, "rank 0: MPI_Publish_name failed: %d\n", rc);
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  char got[MPI_MAX_PORT_NAME] = {0};
  int rc = MPI_Lookup_name(service, MPI_INFO_NULL, got);
  const int ok = rc == MPI_SUCCESS && strcmp(got, want) == 0;
  printf("rank %d: lookup %s -> %s %s\n", rank, service, rc == MPI_SUCCESS ? got : "(failed)",
         ok ? "OK" : "WRONG");
  fflush(stdout);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) MPI_Unpublish_name(service, MPI_INFO_NULL, want);
  MPI_Finalize();
  return ok ? 0 : 1;
}
