/* A ping-pong latency test in the manner of OSU's osu_latency (which Debian does not package):
 * ranks 0 and 1 bounce a message of SIZE bytes (default 0) ITERS times (default 10000) after
 * ITERS/10 warm-up rounds, and rank 0 prints the one-way latency in microseconds:
 *   "latency SIZE bytes: 5.40 us"
 * Every rank first prints where it runs and the CPUs it may run on, from /proc/self/status:
 *   "rank 1 on host2 cpus 1"
 * Usage: mpirun -np 2 mpi-latency [ITERS [SIZE]] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void allowed_cpus(char* out, size_t len) {
  FILE* f = fopen("/proc/self/status", "r");
  char line[4096];
  snprintf(out, len, "?");
  if (f == NULL) return;
  while (fgets(line, sizeof line, f) != NULL) {
    if (strncmp(line, "Cpus_allowed_list:", 18) == 0) {
      char* v = line + 18;
      while (*v == ' ' || *v == '\t') ++v;
      v[strcspn(v, "\n")] = '\0';
      snprintf(out, len, "%s", v);
    }
  }
  fclose(f);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int iters = argc > 1 ? atoi(argv[1]) : 10000;
  const int bytes = argc > 2 ? atoi(argv[2]) : 0;
  const int warmup = iters / 10 + 1;
  char host[MPI_MAX_PROCESSOR_NAME];
  int host_len = 0;
  MPI_Get_processor_name(host, &host_len);
  char cpus[1024];
  allowed_cpus(cpus, sizeof cpus);
  printf("rank %d on %s cpus %s\n", rank, host, cpus);
  fflush(stdout);
  if (size < 2) {
    if (rank == 0) fprintf(stderr, "mpi-latency needs 2 ranks\n");
    MPI_Finalize();
    return 2;
  }
  char* buf = calloc((size_t)bytes + 1, 1);
  double start = 0;
  MPI_Barrier(MPI_COMM_WORLD);
  for (int i = 0; i < warmup + iters; ++i) {
    if (i == warmup) start = MPI_Wtime();
    if (rank == 0) {
      MPI_Send(buf, bytes, MPI_CHAR, 1, 1, MPI_COMM_WORLD);
      MPI_Recv(buf, bytes, MPI_CHAR, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else if (rank == 1) {
      MPI_Recv(buf, bytes, MPI_CHAR, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Send(buf, bytes, MPI_CHAR, 0, 1, MPI_COMM_WORLD);
    }
  }
  if (rank == 0) {
    const double us = (MPI_Wtime() - start) * 1e6 / (2.0 * iters);
    printf("latency %d bytes: %.2f us\n", bytes, us);
  }
  free(buf);
  MPI_Finalize();
  return 0;
}
