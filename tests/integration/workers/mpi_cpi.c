/* The computation of mpi4py's cpi demo (demo/compute-pi/cpi-cco.py, after MPICH's examples/cpi.c):
 * rank 0 broadcasts the number of intervals, every rank integrates 4/(1+x^2) over its share,
 * and a reduction to rank 0 gives pi. In C so that the test needs no python3-mpi4py. Exits 1
 * when the result is off, so a job that "succeeds" with a wrong answer fails the test. */
#include <math.h>
#include <mpi.h>
#include <stdio.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int size = 0, rank = 0, len = 0;
  char host[MPI_MAX_PROCESSOR_NAME];
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Get_processor_name(host, &len);
  printf("Process %d of %d on %s\n", rank, size, host);
  fflush(stdout);
  int n = rank == 0 ? 1000000 : 0;
  MPI_Bcast(&n, 1, MPI_INT, 0, MPI_COMM_WORLD);
  const double h = 1.0 / (double)n;
  double sum = 0.0;
  for (int i = rank + 1; i <= n; i += size) {
    const double x = h * ((double)i - 0.5);
    sum += 4.0 / (1.0 + x * x);
  }
  const double mine = h * sum;
  double pi = 0.0;
  MPI_Reduce(&mine, &pi, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
  int bad = 0;
  if (rank == 0) {
    const double error = fabs(pi - 3.141592653589793238462643);
    printf("pi is approximately %.16f, error is %.16f\n", pi, error);
    bad = error > 1e-9;
  }
  MPI_Bcast(&bad, 1, MPI_INT, 0, MPI_COMM_WORLD);
  MPI_Finalize();
  return bad;
}
