/* fence_timing: a bare PMIx client, for run.sh --profile: what one PMIx fence round of the whole
 * job costs under a launcher's PMIx servers (trainlet-pmix over trainlet's rendezvous, or
 * slurmstepd's), without MPI around it. Each rank times PMIx_Init, then 6 fences with data
 * collection (a 64-byte value put before each, as MPI_Init's modex does), then 6 without
 * (MPI_Init's closing barrier, MPI_Finalize's), and prints one line of microseconds. The first
 * fence of each kind also waits for the slowest rank to arrive; run.sh reports the later ones.
 * Built by run.sh with gcc and pkg-config pmix into its scratch directory. */
#include <pmix.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define ROUNDS 6

static long long now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (long long)t.tv_sec * 1000000LL + t.tv_nsec / 1000;
}

int main(void) {
  pmix_proc_t me;
  long long t0 = now_us();
  if (PMIx_Init(&me, NULL, 0) != PMIX_SUCCESS) {
    fprintf(stderr, "fence_timing: PMIx_Init failed\n");
    return 1;
  }
  long long init_us = now_us() - t0;
  pmix_info_t collect;
  bool yes = true;
  PMIX_INFO_LOAD(&collect, PMIX_COLLECT_DATA, &yes, PMIX_BOOL);
  long long with_data[ROUNDS], without[ROUNDS];
  for (int i = 0; i < ROUNDS; ++i) {
    char key[32], blob[64];
    snprintf(key, sizeof key, "fence.%d", i);
    memset(blob, 'a' + i, sizeof blob - 1);
    blob[sizeof blob - 1] = 0;
    pmix_value_t v;
    PMIX_VALUE_LOAD(&v, blob, PMIX_STRING);
    PMIx_Put(PMIX_GLOBAL, key, &v);
    PMIx_Commit();
    t0 = now_us();
    if (PMIx_Fence(NULL, 0, &collect, 1) != PMIX_SUCCESS) return 1;
    with_data[i] = now_us() - t0;
  }
  for (int i = 0; i < ROUNDS; ++i) {
    t0 = now_us();
    if (PMIx_Fence(NULL, 0, NULL, 0) != PMIX_SUCCESS) return 1;
    without[i] = now_us() - t0;
  }
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  printf("fence rank %u on %s: init %lld data", me.rank, host, init_us);
  for (int i = 0; i < ROUNDS; ++i) printf(" %lld", with_data[i]);
  printf(" nodata");
  for (int i = 0; i < ROUNDS; ++i) printf(" %lld", without[i]);
  printf("\n");
  fflush(stdout);
  PMIx_Finalize(NULL, 0);
  return 0;
}
