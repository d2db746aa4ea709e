/* mpi-allreduce: every rank contributes rank+1; MPI_Allreduce sums them, MPI_Barrier lines the
 * ranks up, and every rank prints the sum with the value it expects, n(n+1)/2. Exits 1 on a
 * wrong sum, so a broken collective fails the job. TRAINLET_FAIL_RANK=N makes rank N exit 3
 * after the barrier (used by the tests to fail one rank on purpose). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  char host[256] = {0};
  gethostname(host, sizeof host - 1);

  long mine = rank + 1, sum = 0;
  MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  MPI_Barrier(MPI_COMM_WORLD);
  const long expected = (long)size * (size + 1) / 2;
  printf("rank %d of %d on %s: allreduce sum %ld (expected %ld) %s\n", rank, size, host, sum,
         expected, sum == expected ? "OK" : "WRONG");
  fflush(stdout);

  const char* fail = getenv("TRAINLET_FAIL_RANK");
  if (fail != NULL && atoi(fail) == rank) {
    fprintf(stderr, "rank %d: failing on purpose (TRAINLET_FAIL_RANK)\n", rank);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 3);
  }
  MPI_Finalize();
  return sum == expected ? 0 : 1;
}
