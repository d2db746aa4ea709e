/* mpi_trace: an LD_PRELOAD library for run.sh --trace that says where an MPI rank's time goes,
 * under any launcher, without changing the program. It wraps, by symbol interposition:
 *   MPI_Init, MPI_Allreduce + MPI_Barrier, MPI_Finalize (through PMPI_*);
 *   OpenMPI 4.1's own layers, whose calls cross shared libraries and so go through the PLT:
 *   orte_init, opal_init, mca_base_framework_open (per framework), orte_finalize;
 *   libpmix's client API: PMIx_Init, PMIx_Fence, PMIx_Fence_nb (until its callback),
 *   PMIx_Get, PMIx_Get_nb (until its callback), PMIx_Commit, PMIx_Finalize;
 *   and dlopen (OpenMPI's and libpmix's components).
 * For MPI_Init, the collectives and MPI_Finalize it also reads the main thread's CPU time and
 * its run-queue wait (/proc/thread-self/schedstat: time runnable but not running), so each span
 * splits into CPU, waiting for a CPU, and waiting for something else (a fence, a peer).
 * It also reads, at load (its constructor, once every library is loaded and relocated), the CPU
 * and run-queue wait the process had so far: its exec and the dynamic loader's work.
 * After MPI_Finalize returns it prints one line on stdout, microseconds:
 *   mpitrace rank R host H pre_cpu=.. pre_runq=.. total_cpu=.. init=.. ... fw.<framework>=..
 * It links neither libmpi nor libpmix (every real function is found with dlsym(RTLD_NEXT)), so in
 * a process that is no MPI rank (mpirun, trainlet-pmix, which inherit LD_PRELOAD from the job's
 * env) it loads nothing more and prints nothing. Built by run.sh with gcc -shared (mpi.h and
 * pmix.h for the types only) into its scratch directory. Not thread-safe beyond what
 * MPI_THREAD_SINGLE programs and libpmix's progress thread need (a mutex for the rest). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <pmix.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static long long now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (long long)t.tv_sec * 1000000LL + t.tv_nsec / 1000;
}
static long long cpu_us(clockid_t clock) {
  struct timespec t;
  clock_gettime(clock, &t);
  return (long long)t.tv_sec * 1000000LL + t.tv_nsec / 1000;
}
/* The calling thread's run-queue wait so far, µs (field 2 of schedstat, ns). */
static long long runq_us(void) {
  FILE* f = fopen("/proc/thread-self/schedstat", "r");
  if (f == NULL) return 0;
  unsigned long long run = 0, wait = 0;
  int n = fscanf(f, "%llu %llu", &run, &wait);
  fclose(f);
  return n == 2 ? (long long)(wait / 1000) : 0;
}

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static __thread int depth; /* > 0: inside one of our PMIx wrappers (no double counting) */

#define MAX_FENCES 8
#define MAX_FW 48
static struct {
  long long t_ctor;
  long long pre_cpu, pre_runq; /* at load: the process's CPU and run-queue wait since exec */
  /* spans: wall, main thread CPU, main thread run-queue wait, process CPU (all threads) */
  long long init[4], coll[4], fin[4];
  long long orte_init, opal_init, pmix_init, pmix_fin, orte_fin, commit;
  int fences;
  long long fence_us[MAX_FENCES];
  int fence_data[MAX_FENCES]; /* 1: PMIX_COLLECT_DATA asked */
  long long fence_fin;        /* fences during MPI_Finalize: wall */
  int gets, gets_slow;        /* slow: > 1 ms */
  long long get_us, get_max;
  int gets_nb;
  long long get_nb_us;
  int dlopens;
  long long dlopen_us;
  int in_init, in_fin;
  int nfw;
  char fw_name[MAX_FW][40];
  long long fw_us[MAX_FW];
} S;

/* Preloaded libraries' constructors run once the dynamic loader has loaded and relocated every
 * library (libmpi and its dependencies), before main: what the process used so far is its exec
 * and its loading. */
__attribute__((constructor)) static void on_load(void) {
  S.t_ctor = now_us();
  S.pre_cpu = cpu_us(CLOCK_PROCESS_CPUTIME_ID);
  S.pre_runq = runq_us();
}

static void span_start(long long s[4]) {
  s[0] = now_us();
  s[1] = cpu_us(CLOCK_THREAD_CPUTIME_ID);
  s[2] = runq_us();
  s[3] = cpu_us(CLOCK_PROCESS_CPUTIME_ID);
}
static void span_end(long long s[4]) {
  s[0] = now_us() - s[0];
  s[1] = cpu_us(CLOCK_THREAD_CPUTIME_ID) - s[1];
  s[2] = runq_us() - s[2];
  s[3] = cpu_us(CLOCK_PROCESS_CPUTIME_ID) - s[3];
}

#define REAL(name)                      \
  static __typeof__(&name) real_##name; \
  if (real_##name == NULL) real_##name = (__typeof__(&name))dlsym(RTLD_NEXT, #name)

/* ---- MPI --------------------------------------------------------------------------------------
 */
int MPI_Init(int* argc, char*** argv) {
  REAL(PMPI_Init);
  S.in_init = 1;
  span_start(S.init);
  int rc = real_PMPI_Init(argc, argv);
  span_end(S.init);
  S.in_init = 0;
  return rc;
}

static int coll_started;
int MPI_Allreduce(const void* sb, void* rb, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c) {
  REAL(PMPI_Allreduce);
  if (!coll_started) {
    coll_started = 1;
    span_start(S.coll);
  }
  return real_PMPI_Allreduce(sb, rb, n, t, op, c);
}
int MPI_Barrier(MPI_Comm c) {
  REAL(PMPI_Barrier);
  int rc = real_PMPI_Barrier(c);
  if (coll_started == 1) {
    coll_started = 2;
    span_end(S.coll);
  }
  return rc;
}

static void print_line(void) {
  int rank = 0;
  char host[64] = {0};
  gethostname(host, sizeof host - 1);
  const char* r = getenv("OMPI_COMM_WORLD_RANK");
  if (r == NULL) r = getenv("PMIX_RANK");
  if (r != NULL) rank = atoi(r);
  char line[8192];
  int o = snprintf(line, sizeof line, "mpitrace rank %d host %s:", rank, host);
#define P(...) o += snprintf(line + o, sizeof line - (size_t)o, __VA_ARGS__)
  P(" pre_cpu=%lld pre_runq=%lld total_cpu=%lld", S.pre_cpu, S.pre_runq,
    cpu_us(CLOCK_PROCESS_CPUTIME_ID));
  P(" init=%lld init_cpu=%lld init_runq=%lld init_pcpu=%lld", S.init[0], S.init[1], S.init[2],
    S.init[3]);
  P(" orte_init=%lld opal_init=%lld pmix_init=%lld commit=%lld", S.orte_init, S.opal_init,
    S.pmix_init, S.commit);
  for (int i = 0; i < S.fences && i < MAX_FENCES; ++i)
    P(" fence%d=%lld fence%d_data=%d", i + 1, S.fence_us[i], i + 1, S.fence_data[i]);
  P(" fences=%d gets=%d get_us=%lld get_max=%lld gets_slow=%d gets_nb=%d get_nb_us=%lld", S.fences,
    S.gets, S.get_us, S.get_max, S.gets_slow, S.gets_nb, S.get_nb_us);
  P(" dlopens=%d dlopen_us=%lld", S.dlopens, S.dlopen_us);
  P(" coll=%lld coll_cpu=%lld coll_runq=%lld", S.coll[0], S.coll[1], S.coll[2]);
  P(" fin=%lld fin_cpu=%lld fin_runq=%lld fin_fence=%lld orte_fin=%lld pmix_fin=%lld", S.fin[0],
    S.fin[1], S.fin[2], S.fence_fin, S.orte_fin, S.pmix_fin);
  for (int i = 0; i < S.nfw; ++i) P(" fw.%s=%lld", S.fw_name[i], S.fw_us[i]);
#undef P
  printf("%s\n", line);
  fflush(stdout);
}

int MPI_Finalize(void) {
  REAL(PMPI_Finalize);
  S.in_fin = 1;
  span_start(S.fin);
  int rc = real_PMPI_Finalize();
  span_end(S.fin);
  S.in_fin = 0;
  print_line();
  return rc;
}

/* ---- OpenMPI's layers ------------------------------------------------------------------------ */
int orte_init(int* argc, char*** argv, int flags) {
  REAL(orte_init);
  long long t = now_us();
  int rc = real_orte_init(argc, argv, flags);
  S.orte_init += now_us() - t;
  return rc;
}
int orte_finalize(void) {
  REAL(orte_finalize);
  long long t = now_us();
  int rc = real_orte_finalize();
  S.orte_fin += now_us() - t;
  return rc;
}
int opal_init(int* argc, char*** argv) {
  REAL(opal_init);
  long long t = now_us();
  int rc = real_opal_init(argc, argv);
  S.opal_init += now_us() - t;
  return rc;
}
/* mca_base_framework_t begins with its project and framework names (OpenMPI 4.1). */
struct fw_head {
  char* project;
  char* name;
};
int mca_base_framework_open(struct fw_head* fw, int flags) {
  REAL(mca_base_framework_open);
  long long t = now_us();
  int rc = real_mca_base_framework_open(fw, flags);
  long long d = now_us() - t;
  if (S.in_init && fw != NULL && fw->name != NULL) {
    pthread_mutex_lock(&mu);
    int i = 0;
    while (i < S.nfw && strcmp(S.fw_name[i], fw->name) != 0) ++i;
    if (i == S.nfw && S.nfw < MAX_FW) {
      snprintf(S.fw_name[i], sizeof S.fw_name[i], "%s", fw->name);
      ++S.nfw;
    }
    if (i < MAX_FW) S.fw_us[i] += d;
    pthread_mutex_unlock(&mu);
  }
  return rc;
}

/* ---- libpmix --------------------------------------------------------------------------------- */
pmix_status_t PMIx_Init(pmix_proc_t* proc, pmix_info_t info[], size_t ninfo) {
  REAL(PMIx_Init);
  ++depth;
  long long t = now_us();
  pmix_status_t rc = real_PMIx_Init(proc, info, ninfo);
  S.pmix_init += now_us() - t;
  --depth;
  return rc;
}
pmix_status_t PMIx_Finalize(const pmix_info_t info[], size_t ninfo) {
  REAL(PMIx_Finalize);
  ++depth;
  long long t = now_us();
  pmix_status_t rc = real_PMIx_Finalize(info, ninfo);
  S.pmix_fin += now_us() - t;
  --depth;
  return rc;
}
pmix_status_t PMIx_Commit(void) {
  REAL(PMIx_Commit);
  ++depth;
  long long t = now_us();
  pmix_status_t rc = real_PMIx_Commit();
  S.commit += now_us() - t;
  --depth;
  return rc;
}

static int collects(const pmix_info_t info[], size_t ninfo) {
  for (size_t i = 0; i < ninfo; ++i)
    if (strcmp(info[i].key, PMIX_COLLECT_DATA) == 0)
      return info[i].value.type == PMIX_BOOL ? info[i].value.data.flag : 1;
  return 0;
}
static void fence_done(long long began, int data) {
  long long d = now_us() - began;
  pthread_mutex_lock(&mu);
  if (S.fences < MAX_FENCES) {
    S.fence_us[S.fences] = d;
    S.fence_data[S.fences] = data;
  }
  ++S.fences;
  if (S.in_fin) S.fence_fin += d;
  pthread_mutex_unlock(&mu);
}

pmix_status_t PMIx_Fence(const pmix_proc_t procs[], size_t nprocs, const pmix_info_t info[],
                         size_t ninfo) {
  REAL(PMIx_Fence);
  if (depth > 0) return real_PMIx_Fence(procs, nprocs, info, ninfo);
  ++depth;
  long long t = now_us();
  pmix_status_t rc = real_PMIx_Fence(procs, nprocs, info, ninfo);
  fence_done(t, collects(info, ninfo));
  --depth;
  return rc;
}

struct op_wrap {
  pmix_op_cbfunc_t cb;
  void* cbdata;
  long long began;
  int data;
};
static void fence_nb_done(pmix_status_t status, void* cbdata) {
  struct op_wrap* w = cbdata;
  fence_done(w->began, w->data);
  if (w->cb != NULL) w->cb(status, w->cbdata);
  free(w);
}
pmix_status_t PMIx_Fence_nb(const pmix_proc_t procs[], size_t nprocs, const pmix_info_t info[],
                            size_t ninfo, pmix_op_cbfunc_t cbfunc, void* cbdata) {
  REAL(PMIx_Fence_nb);
  if (depth > 0) return real_PMIx_Fence_nb(procs, nprocs, info, ninfo, cbfunc, cbdata);
  struct op_wrap* w = malloc(sizeof *w);
  w->cb = cbfunc;
  w->cbdata = cbdata;
  w->began = now_us();
  w->data = collects(info, ninfo);
  pmix_status_t rc = real_PMIx_Fence_nb(procs, nprocs, info, ninfo, fence_nb_done, w);
  if (rc != PMIX_SUCCESS) free(w); /* the callback is not called then */
  return rc;
}

pmix_status_t PMIx_Get(const pmix_proc_t* proc, const char key[], const pmix_info_t info[],
                       size_t ninfo, pmix_value_t** val) {
  REAL(PMIx_Get);
  if (depth > 0) return real_PMIx_Get(proc, key, info, ninfo, val);
  ++depth;
  long long t = now_us();
  pmix_status_t rc = real_PMIx_Get(proc, key, info, ninfo, val);
  long long d = now_us() - t;
  pthread_mutex_lock(&mu);
  ++S.gets;
  S.get_us += d;
  if (d > S.get_max) S.get_max = d;
  if (d > 1000) ++S.gets_slow;
  pthread_mutex_unlock(&mu);
  --depth;
  return rc;
}

struct get_wrap {
  pmix_value_cbfunc_t cb;
  void* cbdata;
  long long began;
};
static void get_nb_done(pmix_status_t status, pmix_value_t* kv, void* cbdata) {
  struct get_wrap* w = cbdata;
  long long d = now_us() - w->began;
  pthread_mutex_lock(&mu);
  ++S.gets_nb;
  S.get_nb_us += d;
  pthread_mutex_unlock(&mu);
  if (w->cb != NULL) w->cb(status, kv, w->cbdata);
  free(w);
}
pmix_status_t PMIx_Get_nb(const pmix_proc_t* proc, const char key[], const pmix_info_t info[],
                          size_t ninfo, pmix_value_cbfunc_t cbfunc, void* cbdata) {
  REAL(PMIx_Get_nb);
  if (depth > 0) return real_PMIx_Get_nb(proc, key, info, ninfo, cbfunc, cbdata);
  struct get_wrap* w = malloc(sizeof *w);
  w->cb = cbfunc;
  w->cbdata = cbdata;
  w->began = now_us();
  pmix_status_t rc = real_PMIx_Get_nb(proc, key, info, ninfo, get_nb_done, w);
  if (rc != PMIX_SUCCESS) free(w);
  return rc;
}

/* ---- the dynamic loader ---------------------------------------------------------------------- */
void* dlopen(const char* file, int mode) {
  REAL(dlopen);
  long long t = now_us();
  void* h = real_dlopen(file, mode);
  long long d = now_us() - t;
  pthread_mutex_lock(&mu);
  ++S.dlopens;
  S.dlopen_us += d;
  pthread_mutex_unlock(&mu);
  return h;
}
