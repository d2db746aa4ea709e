/* launch_timing: the allreduce example with wall-clock stamps, for run.sh --profile. Each rank
 * prints one line: its rank, host, and CLOCK_REALTIME in microseconds at four points: the
 * process's start (its start time from /proc/self/stat, so the loader and libmpi's constructors
 * count as launch), main() entered, MPI_Init returned, MPI_Allreduce + MPI_Barrier done, and
 * MPI_Finalize returned (the start is read from /proc in clock ticks: 10 ms resolution), then
 * the allreduce example's own line. Built by run.sh with mpicc into its scratch directory. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static long long now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  return (long long)t.tv_sec * 1000000LL + t.tv_nsec / 1000;
}

/* The process's start, in CLOCK_REALTIME microseconds: boot time + starttime (field 22). */
static long long start_us(void) {
  char buf[4096];
  FILE* f = fopen("/proc/self/stat", "r");
  if (f == NULL) return 0;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  char* p = strrchr(buf, ')');
  if (p == NULL) return 0;
  unsigned long long ticks = 0;
  int field = 2;
  for (char* tok = strtok(p + 1, " "); tok != NULL; tok = strtok(NULL, " ")) {
    if (++field == 22) {
      ticks = strtoull(tok, NULL, 10);
      break;
    }
  }
  struct timespec mono, real;
  clock_gettime(CLOCK_BOOTTIME, &mono);
  clock_gettime(CLOCK_REALTIME, &real);
  long long boot_real_us =
      ((long long)real.tv_sec - mono.tv_sec) * 1000000LL + (real.tv_nsec - mono.tv_nsec) / 1000;
  return boot_real_us + (long long)(ticks * 1000000ULL / sysconf(_SC_CLK_TCK));
}

int main(int argc, char** argv) {
  long long t_main = now_us();
  MPI_Init(&argc, &argv);
  long long t_init = now_us();
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  long mine = rank + 1, sum = 0;
  MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  MPI_Barrier(MPI_COMM_WORLD);
  long long t_coll = now_us();
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  MPI_Finalize();
  long long t_fin = now_us();
  const long expected = (long)size * (size + 1) / 2;
  printf("timing rank %d of %d on %s: start %lld main %lld init %lld coll %lld fin %lld\n", rank,
         size, host, start_us(), t_main, t_init, t_coll, t_fin);
  /* The allreduce example's line, which run.sh checks. */
  printf("rank %d of %d on %s: allreduce sum %ld (expected %ld) %s\n", rank, size, host, sum,
         expected, sum == expected ? "OK" : "WRONG");
  fflush(stdout);
  return sum == expected ? 0 : 1;
}
