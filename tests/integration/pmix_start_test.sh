#!/usr/bin/env bash
# trainlet-pmix's start (agent/pmix/main.cpp), run as trainlet-step runs it, its rank env stream
# read up to "ready":
#  1. More local ranks than CPUs: every rank is told OMPI_MCA_mpi_yield_when_idle=1, as OpenMPI's
#     orted tells the ranks of an oversubscribed node; not with as many CPUs as ranks, and not
#     when the job's env sets it already.
#  2. Ranks that trainlet binds (TRAINLET_CPUSET) are told OMPI_MCA_orte_bound_at_launch=1, as
#     orted tells the ranks it binds; not unbound ranks, nor when the job's env says how OpenMPI
#     binds.
#  3. Given the agent's topology (TRAINLET_PMIX_TOPOLOGY_XML, common/pmix/node_topology_xml.h;
#     here lstopo's XML of this machine), libpmix takes it and does no hwloc discovery of its own
#     (libpmix's pmix_hwloc_verbose says which); without it, or with a file it cannot load (said
#     on stderr), libpmix discovers the machine as before.
#  4. Real OpenMPI ranks (the allreduce example, 2 ranks on this node, whose fences libpmix
#     completes locally) adopt the node's topology, handed over by the agent, from trainlet-pmix
#     instead of discovering it in MPI_Init (OpenMPI's hwloc_base_verbose says which).
#  5. A PMIx_Get of another node's rank, for a key no fence brought (what a direct modex would
#     fetch; trainlet-pmix serves none), is answered "not found" at once, never left waiting
#     (a bare PMIx client built here with pkg-config pmix; skipped without a compiler).
#  6. MPI_Finalize without a delayed ACK: libpmix 4.2.2's client socket has Nagle on, and the
#     small messages a rank sends back to back in PMIx_Finalize waited about 40 ms for the
#     server's delayed ACK; trainlet-pmix ACKs at once (agent/pmix/quick_ack.cpp). Real OpenMPI
#     ranks (a probe built here with mpicc; skipped without it) time their MPI_Finalize: under
#     35 ms, where the stall alone is at least 40 (the kernel's minimum delayed-ACK time).
#  8. libpmix's shared-memory store fitted to the job (agent/pmix/dstore_sizes.h): every local
#     rank is told the server's segment sizes (NS_META_SEG_SIZE, NS_DATA_SEG_SIZE), below
#     libpmix's 4 MiB for a small job; the job's own value wins; and a job of 8002 ranks, whose
#     job data fills several fitted segments, is still served (a bare PMIx client reads the job
#     size and the last rank's host). Runs before 7, which ends the test when not root.
#  7. Ready promptly on a node where munge is installed but munged is not running (a stale
#     /run/munge/munge.socket.2 refusing connections): libpmix's munge security component would
#     retry libmunge for about 2.3 s; trainlet-pmix uses PMIx's native security. The stale
#     socket is made in a private mount namespace (a tmpfs over /run), so the machine's own
#     /run/munge is never touched. Needs root (unshare --mount); skipped otherwise.
set -euo pipefail
: "${TRAINLET_BIN:?TRAINLET_BIN must point at the bin directory of the build}"
PMIX="$TRAINLET_BIN/trainlet-pmix"
if [ ! -x "$PMIX" ]; then echo "SKIP: trainlet-pmix was not built (libpmix-dev missing)"; exit 77; fi
WORK=$(mktemp -d /tmp/trainlet-pmix-start.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# The helper: starts trainlet-pmix with the job map $MAP (and the caller's env, plus ARGS as
# NAME=VALUE), prints the milliseconds until its "ready" line, then the stream; stops it by PID.
cat > "$WORK/start.sh" <<'EOF'
set -euo pipefail
exec 3< <(env "$@" TRAINLET_PMIX_JOB_MAP="$MAP" TRAINLET_JOB=t TRAINLET_ATTEMPT=1 \
  TRAINLET_NODE_RANK=0 TRAINLET_RENDEZVOUS_ENDPOINT="ipc://$WORK/none.sock" \
  TRAINLET_WORK_DIR="$WORK/work" "$PMIX" 2> "$WORK/stderr" & echo "pid $!")
read -r _ pid <&3
t0=$EPOCHREALTIME
stream=""
while IFS= read -r -t 20 line <&3; do
  stream+="$line"$'\n'
  [ "$line" = ready ] && break
done
t1=$EPOCHREALTIME
# KILL, not TERM: on TERM it runs libpmix's finalize, about 1.5 s, for nothing this test checks.
# Gone before the next start, which uses the same work dir.
kill -9 "$pid" 2>/dev/null || true
for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.02; done
awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%d\n", (b - a) * 1000 }'
printf '%s' "$stream"
EOF
mkdir -p "$WORK/work"
map() {  # map RANKS... -> a job map file of one node with these ranks
  local f="$WORK/map.$#"
  printf 'trainlet-pmix-job-map 1\nnspace trainlet.t.1\nnode %s %s\n' "$(hostname)" \
    "$(IFS=,; echo "$*")" > "$f"
  echo "$f"
}
start() {  # start MAP [NAME=VALUE...]: the helper's output
  MAP=$1 WORK=$WORK PMIX=$PMIX bash "$WORK/start.sh" "${@:2}"
}
yield_lines() { grep -c "^env [0-9]* OMPI_MCA_mpi_yield_when_idle=1$" <<<"$1" || true; }

# 1. Oversubscribed: 3 ranks on one CPU, then 1 rank on one CPU, then 3 ranks with the job's own
# setting.
out=$(taskset -c 0 bash -c "$(declare -f start); $(declare -p WORK PMIX); start $(map 0 1 2) -u OMPI_MCA_mpi_yield_when_idle")
grep -qx ready <<<"$out" || fail "trainlet-pmix never said ready: $out $(cat "$WORK/stderr")"
[ "$(yield_lines "$out")" = 3 ] || fail "3 ranks on 1 CPU: each rank should be told to yield: $out"
out=$(taskset -c 0 bash -c "$(declare -f start); $(declare -p WORK PMIX); start $(map 0) -u OMPI_MCA_mpi_yield_when_idle")
grep -qx ready <<<"$out" || fail "trainlet-pmix never said ready: $out"
[ "$(yield_lines "$out")" = 0 ] || fail "1 rank on 1 CPU is not oversubscribed: $out"
out=$(taskset -c 0 bash -c "$(declare -f start); $(declare -p WORK PMIX); start $(map 0 1 2) OMPI_MCA_mpi_yield_when_idle=0")
[ "$(yield_lines "$out")" = 0 ] || fail "the job's own OMPI_MCA_mpi_yield_when_idle must win: $out"
echo "oversubscribed ranks are told to yield, others not, the job's setting wins"

# 2. Bound ranks.
bound_lines() { grep -c "^env [0-9]* OMPI_MCA_orte_bound_at_launch=1$" <<<"$1" || true; }
out=$(start "$(map 0 1)" TRAINLET_CPUSET=0)
[ "$(bound_lines "$out")" = 2 ] || fail "ranks bound by trainlet should be told so: $out"
out=$(start "$(map 0 1)" -u TRAINLET_CPUSET)
[ "$(bound_lines "$out")" = 0 ] || fail "unbound ranks must not be told they are bound: $out"
out=$(start "$(map 0 1)" TRAINLET_CPUSET=0 OMPI_MCA_hwloc_base_binding_policy=core)
[ "$(bound_lines "$out")" = 0 ] || fail "the job's own binding policy must win: $out"
echo "ranks bound by trainlet are told so, others not, the job's binding policy wins"

# 3. The agent's topology, handed over.
command -v lstopo-no-graphics >/dev/null || fail "lstopo-no-graphics (Debian's hwloc) is needed"
lstopo-no-graphics --of xml > "$WORK/live.xml"
hwloc_says() { grep -oE "topology externally provided|doing discovery" "$WORK/stderr" | sort -u | tr '\n' ' '; }
out=$(start "$(map 0 1)" TRAINLET_PMIX_TOPOLOGY_XML="$WORK/live.xml" PMIX_MCA_pmix_hwloc_verbose=2)
grep -qx ready <<<"$out" || fail "trainlet-pmix never said ready: $out $(cat "$WORK/stderr")"
[ "$(hwloc_says)" = "topology externally provided " ] \
  || fail "libpmix should take the agent's topology, not discover: $(cat "$WORK/stderr")"
out=$(start "$(map 0 1)" -u TRAINLET_PMIX_TOPOLOGY_XML PMIX_MCA_pmix_hwloc_verbose=2)
[ "$(hwloc_says)" = "doing discovery " ] || fail "without the agent's topology libpmix discovers: $(cat "$WORK/stderr")"
out=$(start "$(map 0 1)" TRAINLET_PMIX_TOPOLOGY_XML="$WORK/absent.xml" PMIX_MCA_pmix_hwloc_verbose=2)
grep -qx ready <<<"$out" || fail "an unloadable topology file must not stop the server: $out"
[ "$(hwloc_says)" = "doing discovery " ] || fail "an unloadable file: libpmix discovers: $(cat "$WORK/stderr")"
grep -q "trainlet-pmix: hwloc XML $WORK/absent.xml: .*; libpmix discovers" "$WORK/stderr" \
  || fail "the unloadable file should be named: $(cat "$WORK/stderr")"
echo "libpmix takes the agent's topology instead of discovering the machine"

# 4. OpenMPI ranks take the server's topology. The server stays up while the ranks run; each
# rank gets the env the stream gives it, plus the fake daemon URI the mpi runtime gives ranks
# started directly (plugins/runtime/mpi/mpi_direct_launch.cpp).
if [ -x "$TRAINLET_BIN/mpi-allreduce" ]; then
  exec 3< <(env -u TRAINLET_CPUSET TRAINLET_PMIX_TOPOLOGY_XML="$WORK/live.xml" \
    TRAINLET_PMIX_JOB_MAP="$(map 0 1)" TRAINLET_JOB=t \
    TRAINLET_ATTEMPT=1 TRAINLET_NODE_RANK=0 TRAINLET_RENDEZVOUS_ENDPOINT="ipc://$WORK/none.sock" \
    TRAINLET_WORK_DIR="$WORK/work" "$PMIX" 2> "$WORK/stderr3" & echo "pid $!")
  read -r _ server <&3
  declare -A rank_env=()
  while IFS= read -r -t 20 line <&3; do
    [ "$line" = ready ] && break
    read -r _ r kv <<<"$line"
    rank_env[$r]+="$kv"$'\n'
  done
  pids=()
  for r in 0 1; do
    mapfile -t kvs <<<"${rank_env[$r]%$'\n'}"
    timeout 60 env OMPI_MCA_orte_local_daemon_uri='1.0;tcp://127.0.0.1:1' OMPI_MCA_pml=ob1 \
      OMPI_MCA_btl=self,vader OMPI_MCA_hwloc_base_verbose=2 "${kvs[@]}" \
      "$TRAINLET_BIN/mpi-allreduce" > "$WORK/rank.$r" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || fail "rank failed: $(cat "$WORK"/rank.* "$WORK/stderr3")"; done
  kill -TERM "$server" 2>/dev/null || true
  wait "$server" 2>/dev/null || true
  for r in 0 1; do
    out=$(cat "$WORK/rank.$r")
    grep -q "allreduce sum 3 (expected 3) OK" <<<"$out" || fail "rank $r: no right sum: $out"
    grep -qE "hwloc:base: topology in shared memory|hwloc:base loading topology from XML" <<<"$out" \
      || fail "rank $r did not take the server's topology: $out"
    ! grep -q "hwloc:base discovering topology" <<<"$out" || fail "rank $r discovered the topology itself: $out"
  done
  echo "OpenMPI ranks take the node's topology from trainlet-pmix"
else
  echo "topology part skipped: mpi-allreduce was not built"
fi

# 5. A PMIx_Get of a rank on another node (never started here) for a key nobody put.
cat > "$WORK/get_probe.c" <<'EOF'
#include <pmix.h>
#include <stdio.h>
#include <time.h>
int main(void) {
  pmix_proc_t me, peer;
  if (PMIx_Init(&me, NULL, 0) != PMIX_SUCCESS) return 2;
  PMIX_LOAD_PROCID(&peer, me.nspace, 1);
  pmix_value_t* v = NULL;
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  pmix_status_t rc = PMIx_Get(&peer, "trainlet.test.absent", NULL, 0, &v);
  clock_gettime(CLOCK_MONOTONIC, &b);
  printf("get %s in %ld ms\n", PMIx_Error_string(rc),
         (long)((b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000));
  PMIx_Finalize(NULL, 0);
  return 0;
}
EOF
# shellcheck disable=SC2046  # pkg-config's flags are words
if command -v gcc >/dev/null && pkg-config --exists pmix \
    && gcc -O2 "$WORK/get_probe.c" -o "$WORK/get_probe" $(pkg-config --cflags --libs pmix); then
  printf 'trainlet-pmix-job-map 1\nnspace trainlet.t.1\nnode %s 0\nnode elsewhere 1\n' "$(hostname)" \
    > "$WORK/map.two-nodes"
  exec 4< <(env -u TRAINLET_CPUSET TRAINLET_PMIX_JOB_MAP="$WORK/map.two-nodes" TRAINLET_JOB=t \
    TRAINLET_ATTEMPT=1 TRAINLET_NODE_RANK=0 TRAINLET_RENDEZVOUS_ENDPOINT="ipc://$WORK/none.sock" \
    TRAINLET_WORK_DIR="$WORK/work" "$PMIX" 2> "$WORK/stderr4" & echo "pid $!")
  read -r _ server <&4
  kvs=()
  while IFS= read -r -t 20 line <&4; do
    [ "$line" = ready ] && break
    read -r _ _ kv <<<"$line"
    kvs+=("$kv")
  done
  out=$(timeout 20 env "${kvs[@]}" "$WORK/get_probe" 2>&1) || true
  kill -TERM "$server" 2>/dev/null || true
  grep -qE "^get NOT-FOUND in [0-9]+ ms$" <<<"$out" \
    || fail "the get should fail as not found: $out $(cat "$WORK/stderr4")"
  ms=$(sed -E 's/.* in ([0-9]+) ms/\1/' <<<"$out")
  [ "$ms" -lt 2000 ] || fail "the get of a remote rank's absent key took $ms ms"
  echo "a remote rank's absent key: not found in $ms ms"
else
  echo "remote get part skipped: no gcc or no pkg-config pmix"
fi

# 6. MPI_Finalize without the delayed-ACK stall: 2 OpenMPI ranks on this node (fences completed
# locally by libpmix), each timing its own MPI_Finalize. The stall is at least 40 ms (TCP's
# minimum delayed-ACK time); up to 3 tries, so that a loaded machine does not fail the test.
cat > "$WORK/finalize_probe.c" <<'EOF'
#include <mpi.h>
#include <stdio.h>
#include <time.h>
int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Barrier(MPI_COMM_WORLD);
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  MPI_Finalize();
  clock_gettime(CLOCK_MONOTONIC, &b);
  printf("finalize %ld ms\n", (long)((b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000));
  return 0;
}
EOF
mpicc_bin=$(command -v mpicc.openmpi || command -v mpicc || true)
if [ -n "$mpicc_bin" ] && "$mpicc_bin" -O2 "$WORK/finalize_probe.c" -o "$WORK/finalize_probe" 2> "$WORK/mpicc.err"; then
  tries=""
  for _ in 1 2 3; do
    exec 5< <(env -u TRAINLET_CPUSET TRAINLET_PMIX_JOB_MAP="$(map 0 1)" TRAINLET_JOB=t \
      TRAINLET_ATTEMPT=1 TRAINLET_NODE_RANK=0 TRAINLET_RENDEZVOUS_ENDPOINT="ipc://$WORK/none.sock" \
      TRAINLET_WORK_DIR="$WORK/work" "$PMIX" 2> "$WORK/stderr6" & echo "pid $!")
    read -r _ server <&5
    declare -A fin_env=()
    while IFS= read -r -t 20 line <&5; do
      [ "$line" = ready ] && break
      read -r _ r kv <<<"$line"
      fin_env[$r]+="$kv"$'\n'
    done
    pids=()
    for r in 0 1; do
      mapfile -t kvs <<<"${fin_env[$r]%$'\n'}"
      timeout 60 env OMPI_MCA_orte_local_daemon_uri='1.0;tcp://127.0.0.1:1' OMPI_MCA_pml=ob1 \
        OMPI_MCA_btl=self,vader "${kvs[@]}" "$WORK/finalize_probe" > "$WORK/fin.$r" 2>&1 &
      pids+=($!)
    done
    for p in "${pids[@]}"; do
      wait "$p" || fail "finalize probe failed: $(cat "$WORK"/fin.* "$WORK/stderr6")"
    done
    kill -9 "$server" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$server" 2>/dev/null || break; sleep 0.02; done
    unset fin_env
    slowest=$(cat "$WORK"/fin.* | sed -nE 's/^finalize ([0-9]+) ms$/\1/p' | sort -n | tail -1)
    [ -n "$slowest" ] || fail "the finalize probe printed no time: $(cat "$WORK"/fin.*)"
    tries+=" $slowest"
    [ "$slowest" -ge 35 ] || break
  done
  [ "$slowest" -lt 35 ] \
    || fail "MPI_Finalize took$tries ms (slowest rank, per try): the delayed-ACK stall (>= 40 ms)"
  echo "MPI_Finalize without the delayed-ACK stall: slowest rank$tries ms"
else
  echo "finalize part skipped: no mpicc (libopenmpi-dev)"
fi

# 8. libpmix's shared-memory store fitted to the job (agent/pmix/dstore_sizes.h).
seg_lines() { grep -cE "^env [0-9]+ $1=[0-9]+$" <<<"$2" || true; }
seg_value() { sed -nE "s/^env 0 $1=([0-9]+)$/\1/p" <<<"$2"; }
out=$(start "$(map 0 1)" -u NS_META_SEG_SIZE -u NS_DATA_SEG_SIZE \
  TRAINLET_PMIX_TOPOLOGY_XML="$WORK/live.xml")
grep -qx ready <<<"$out" || fail "trainlet-pmix never said ready: $out $(cat "$WORK/stderr")"
[ "$(seg_lines NS_META_SEG_SIZE "$out")" = 2 ] && [ "$(seg_lines NS_DATA_SEG_SIZE "$out")" = 2 ] \
  || fail "each local rank should be told the store's segment sizes: $out"
meta=$(seg_value NS_META_SEG_SIZE "$out")
small=$(seg_value NS_DATA_SEG_SIZE "$out")
[ "$meta" -lt 4194304 ] && [ "$small" -lt 4194304 ] \
  || fail "a 2-rank job's segments should be below libpmix's 4 MiB: meta $meta, data $small"
out=$(start "$(map 0 1)" NS_DATA_SEG_SIZE=1048576)
[ "$(seg_value NS_DATA_SEG_SIZE "$out")" = 1048576 ] \
  || fail "the job's own NS_DATA_SEG_SIZE must win: $out"
# A job of 8002 ranks on 2001 nodes (2 here): its job data (every rank's host, local and node
# rank) fills several fitted data segments, and a bare PMIx client of this node still reads the
# job size and the last rank's host from the store.
cat > "$WORK/job_probe.c" <<'EOF'
#include <pmix.h>
#include <stdio.h>
int main(void) {
  pmix_proc_t me, wild, last;
  if (PMIx_Init(&me, NULL, 0) != PMIX_SUCCESS) return 2;
  PMIX_LOAD_PROCID(&wild, me.nspace, PMIX_RANK_WILDCARD);
  pmix_value_t* v = NULL;
  if (PMIx_Get(&wild, PMIX_JOB_SIZE, NULL, 0, &v) != PMIX_SUCCESS) return 3;
  const uint32_t size = v->data.uint32;
  PMIX_VALUE_RELEASE(v);
  PMIX_LOAD_PROCID(&last, me.nspace, size - 1);
  if (PMIx_Get(&last, PMIX_HOSTNAME, NULL, 0, &v) != PMIX_SUCCESS) return 4;
  printf("job size %u, rank %u on %s\n", size, size - 1, v->data.string);
  PMIX_VALUE_RELEASE(v);
  PMIx_Finalize(NULL, 0);
  return 0;
}
EOF
# shellcheck disable=SC2046  # pkg-config's flags are words
if command -v gcc >/dev/null && pkg-config --exists pmix \
    && gcc -O2 "$WORK/job_probe.c" -o "$WORK/job_probe" $(pkg-config --cflags --libs pmix); then
  { printf 'trainlet-pmix-job-map 1\nnspace trainlet.t.1\nnode %s 0,1\n' "$(hostname)"
    for n in $(seq 1 2000); do
      b=$((2 + 4 * (n - 1)))
      printf 'node n%d %d,%d,%d,%d\n' "$n" "$b" $((b + 1)) $((b + 2)) $((b + 3))
    done; } > "$WORK/map.big"
  exec 6< <(env -u TRAINLET_CPUSET -u NS_META_SEG_SIZE -u NS_DATA_SEG_SIZE \
    TRAINLET_PMIX_TOPOLOGY_XML="$WORK/live.xml" TRAINLET_PMIX_JOB_MAP="$WORK/map.big" \
    TRAINLET_JOB=t TRAINLET_ATTEMPT=1 TRAINLET_NODE_RANK=0 \
    TRAINLET_RENDEZVOUS_ENDPOINT="ipc://$WORK/none.sock" TRAINLET_WORK_DIR="$WORK/work" \
    "$PMIX" 2> "$WORK/stderr8" & echo "pid $!")
  read -r _ server <&6
  kvs=()
  stream=""
  while IFS= read -r -t 60 line <&6; do
    [ "$line" = ready ] && break
    stream+="$line"$'\n'
    read -r _ r kv <<<"$line"
    [ "$r" = 0 ] && kvs+=("$kv")
  done
  data=$(seg_value NS_DATA_SEG_SIZE "$stream")
  out=$(timeout 60 env "${kvs[@]}" "$WORK/job_probe" 2>&1) || true
  kill -9 "$server" 2>/dev/null || true
  for _ in $(seq 50); do kill -0 "$server" 2>/dev/null || break; sleep 0.02; done
  [ -n "$data" ] && [ "$data" -lt 4194304 ] \
    || fail "8002 ranks: the data segment should still be fitted: '$data'"
  [ "$out" = "job size 8002, rank 8001 on n2000" ] \
    || fail "8002 ranks, ${data}-byte data segments: the client should read the job data: $out $(cat "$WORK/stderr8")"
  echo "the store fitted to the job: meta $meta, data $small bytes (2 ranks); 8002 ranks served in $data-byte data segments"
else
  echo "store part: large job skipped: no gcc or no pkg-config pmix"
fi

# 7. A stale munge socket, in a mount namespace of our own.
if [ "$(id -u)" != 0 ] || ! unshare --mount true 2>/dev/null; then
  echo "stale munge socket part skipped: needs root for a private mount namespace"
  exit 0
fi
cat > "$WORK/munge.sh" <<EOF
set -euo pipefail
mount -t tmpfs tmpfs /run
mkdir -p /run/munge
python3 -c 'import socket; s = socket.socket(socket.AF_UNIX); s.bind("/run/munge/munge.socket.2"); s.close()'
MAP="$(map 0)" WORK="$WORK" PMIX="$PMIX" exec bash "$WORK/start.sh" -u PMIX_MCA_psec
EOF
out=$(unshare --mount --propagation private bash "$WORK/munge.sh")
ms=$(head -1 <<<"$out")
grep -qx ready <<<"$out" || fail "trainlet-pmix never said ready: $out $(cat "$WORK/stderr")"
grep -qx "env 0 PMIX_SECURITY_MODE=native" <<<"$out" \
  || fail "the rank should be told native security: $out"
# 2.3 s with libmunge's retries; well under a second without (about 50-80 ms here).
[ "$ms" -lt 1000 ] || fail "trainlet-pmix took $ms ms to be ready beside a stale munge socket"
echo "trainlet-pmix ready in $ms ms beside a stale munge socket, ranks on native security"
