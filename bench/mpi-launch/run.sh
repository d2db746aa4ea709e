#!/usr/bin/env bash
# bench/mpi-launch: the allreduce example (3 hosts x 2 ranks, OpenMPI 4.1) launched four ways on
# the same three namespace hosts, in the same run, repetitions interleaved:
#   direct    `trainletctl apply --wait` returning (submitted, then Complete), job on the
#             `mpi-direct` runtime: trainlet starts the 6 ranks itself, each node's MPI_Init is
#             served by trainlet-pmix (no mpirun, no orted, no trainlet-exec).
#   trainlet  the same apply --wait, job on `mpi-distributed`: mpirun runs on host1 and starts
#             its remote daemons through trainlet-exec and the agents.
#   ssh       what Kubeflow's MPI runtime does: an sshd in every host, keys made by this script,
#             and `mpirun` on host1 starting its remote daemons over ssh; the whole mpirun is timed.
#   srun      `srun --mpi=pmix -N 3 -n 6` from host1 (Debian's Slurm 22.05 and its pmix_v4
#             plugin): munged and slurmctld in the root namespace, a slurmd in each host
#             (bench/mpi-launch/slurm_netns.sh); the whole srun is timed. When Slurm cannot be
#             set up the row says why, and the other three still run.
# All four run the same binary with the same MCA settings: btl self,tcp, TCP on the bridge subnet,
# and the OMPI_MCA_* defaults the mpi runtime gives its launcher (read from a launcher's env,
# printed). A run whose output lacks 6 correct ranks (on host1..3) stops the benchmark, so no
# time is reported for a failed run.
# Then (unless --no-single) one agent with 64 slots in the root namespace: 64 ranks of the
# allreduce example by direct launch on that one agent, against the floor: 64 × /bin/true by a
# posix_spawn loop plus one MPI_Init (one isolated singleton of the same program:
# OMPI_MCA_ess_singleton_isolated=1, no orted), and, for scale, 64 such singletons at once.
#
# usage: bench/mpi-launch/run.sh [--reps N] [--bin BUILD/bin] [--probe] [--logs DIR]
#                                [--mpi-env NAME=VALUE]... [--no-srun] [--no-single]
#                                [--single-ranks N] [--base-pmix FILE] [--profile] [--trace]
#                                [--floor] [--cpu]
#   --reps N   timed repetitions of each contender (default 7), interleaved, after one untimed
#              warm-up of each
#   --bin DIR  the build's bin directory (default $TRAINLET_BIN, else <repo>/build/bin); needs
#              trainletctl, trainlet-agent, trainlet-coordinator, trainlet-exec, trainlet-step,
#              trainlet-pmix, mpi-allreduce
#   --probe    afterwards, time the pieces (median of 5): one ssh connection, one trainlet-exec
#              round trip, mpirun alone inside a trainlet job, mpirun with a launch agent that
#              costs nothing (ip netns exec; from outside and from inside a trainlet job, and with
#              each daemon in a session of its own as sshd and trainlet run it), mpirun with all
#              ranks on host1 (the MPI floor), and a trainlet job whose command is /bin/true
#   --profile  afterwards, REPS more interleaved runs of each contender with a copy of the program
#              that stamps the wall clock (launch_timing.c, built with mpicc): the medians of
#              launcher -> first rank's process, -> every rank in main, MPI_Init, the collectives,
#              MPI_Finalize, and the last rank's exit -> the launcher returning; then one PMIx
#              fence round with and without data under direct (and --base-pmix), mpirun and srun
#              (fence_timing.c)
#   --trace    afterwards, REPS more interleaved runs of each 3-host contender with every rank
#              under mpi_trace.c (an LD_PRELOAD library, built with gcc: MPI_Init, its
#              orte_init/opal_init/PMIx_Init, each framework's open, each PMIx fence and get,
#              dlopens, the collectives and MPI_Finalize, each split into the main thread's CPU,
#              its run-queue wait and the rest): the medians, per contender, side by side
#   --mpi-env NAME=VALUE  an OpenMPI setting for all contenders: trainer env of the trainlet jobs
#              (where it wins over the mpi runtime's defaults) and so also the SSH and srun
#              contenders' env; e.g. --mpi-env OMPI_MCA_pml= gives OpenMPI its own PML selection
#              back (the "before")
#   --logs DIR copy the coordinator's and agents' logs (millisecond timestamps), the job files
#              and the Slurm logs into DIR when the script ends, to see where a run's time went
#   --base-pmix FILE  a fifth contender, "direct (base pmix)": the direct job again, with FILE
#              (another build's trainlet-pmix, e.g. main's) as the node's PMIx server, interleaved
#              with the others (also in --profile and in the single-node row), to time a
#              trainlet-pmix change before/after in one run. The script then runs the agents from
#              a copy of the binaries in its scratch dir and swaps trainlet-pmix there between
#              repetitions (the step starts the one beside itself).
#   --lo-quickack  turn delayed ACKs off on each host's loopback (the route's quickack
#              attribute), for every contender: libpmix 4.2.2 leaves Nagle on its client sockets,
#              and a rank's burst of small PMIx messages (MPI_Finalize's) then waits for a
#              delayed ACK, about 40 ms (bench/README.md)
#   --floor    one more row, the MPI floor: the same 6 ranks with no launcher at all, spawned at
#              once by a python loop on host1 under one trainlet-pmix started beforehand (untimed)
#              for one node of 6 ranks, so that libpmix completes every fence in the server
#              (mpi_floor.py): spawn -> the last rank's exit. Also in --profile and --trace
#   --cpu      afterwards, REPS more interleaved runs of each contender, each under a system-wide
#              `perf record` of the scheduler's switches: the CPU every process of the run used
#              inside the timed span, by kind (ranks, trainlet-pmix, step, agent, coordinator,
#              CLI, mpirun, orted, ssh, sshd, ...), and the other load (cpu_budget.py)
#   --no-srun  leave the srun contender out (its row then says so)
#   --no-single  leave the single-node row out
#   --single-ranks N  ranks of the single-node row (default 64)
# Needs root (network namespaces, sshd on port 22 inside them). Not a ctest test.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
ARGS=("$@")
REPS=7
PROBE=0
PROFILE=0
TRACE=0
LOGS_DIR=""
MPI_ENV=()
SRUN=1
SINGLE=1
SINGLE_RANKS=64
BIN_DIR=${TRAINLET_BIN:-$SRC/build/bin}
BASE_PMIX=""
LO_QUICKACK=0
FLOOR=0
CPU=0
while [ $# -gt 0 ]; do
  case "$1" in
    --reps) REPS=${2:?--reps needs a number}; shift 2 ;;
    --reps=*) REPS=${1#--reps=}; shift ;;
    --bin) BIN_DIR=${2:?--bin needs a directory}; shift 2 ;;
    --bin=*) BIN_DIR=${1#--bin=}; shift ;;
    --probe) PROBE=1; shift ;;
    --profile) PROFILE=1; shift ;;
    --trace) TRACE=1; shift ;;
    --mpi-env) MPI_ENV+=("${2:?--mpi-env needs NAME=VALUE}"); shift 2 ;;
    --mpi-env=*) MPI_ENV+=("${1#--mpi-env=}"); shift ;;
    --logs) LOGS_DIR=${2:?--logs needs a directory}; shift 2 ;;
    --logs=*) LOGS_DIR=${1#--logs=}; shift ;;
    --no-srun) SRUN=0; shift ;;
    --lo-quickack) LO_QUICKACK=1; shift ;;
    --no-single) SINGLE=0; shift ;;
    --single-ranks) SINGLE_RANKS=${2:?--single-ranks needs a number}; shift 2 ;;
    --single-ranks=*) SINGLE_RANKS=${1#--single-ranks=}; shift ;;
    --base-pmix) BASE_PMIX=${2:?--base-pmix needs a file}; shift 2 ;;
    --base-pmix=*) BASE_PMIX=${1#--base-pmix=}; shift ;;
    --floor) FLOOR=1; shift ;;
    --cpu) CPU=1; shift ;;
    -h|--help) sed -n '2,76p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
done
case "$REPS" in ''|*[!0-9]*|0) echo "--reps must be a positive integer, got '$REPS'" >&2; exit 2 ;; esac
case "$SINGLE_RANKS" in ''|*[!0-9]*|0) echo "--single-ranks must be a positive integer, got '$SINGLE_RANKS'" >&2; exit 2 ;; esac
for kv in "${MPI_ENV[@]}"; do
  case "$kv" in OMPI_MCA_[A-Za-z0-9_]*=*) ;; *) echo "--mpi-env wants OMPI_MCA_NAME=VALUE, got '$kv'" >&2; exit 2 ;; esac
done

die() { echo "mpi-launch: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "needs root: network namespaces and an sshd on port 22 in each"
# The whole run in a mount namespace of its own, with an empty /run/munge: every PMIx server of
# every contender (trainlet-pmix, mpirun's and orted's, slurmstepd's) would otherwise try the
# machine's munged for its clients, and where munge is installed but munged is not running (a
# stale socket, as on the machine of the results below) libmunge retries for about 2.3 s, in
# each of them. Without the socket they all go on at once, as on a host without munge. srun's
# Slurm uses a munged of its own (slurm_netns.sh). Nothing outside the namespace changes.
if [ -z "${TRAINLET_MPI_BENCH_NS:-}" ]; then
  command -v unshare >/dev/null || die "unshare not found (util-linux)"
  exec env TRAINLET_MPI_BENCH_NS=1 unshare --mount --propagation private "$0" "${ARGS[@]}"
fi
if [ -d /run/munge ]; then mount -t tmpfs -o size=1m,mode=755 tmpfs /run/munge; fi
for tool in mpirun ssh ssh-keygen ip unshare python3; do
  command -v "$tool" >/dev/null || die "$tool not found (scripts/install-deps installs it)"
done
SSHD=/usr/sbin/sshd
[ -x "$SSHD" ] || die "$SSHD not found: install openssh-server (scripts/install-deps)"
BIN_DIR=$(cd "$BIN_DIR" 2>/dev/null && pwd) || die "--bin: no such directory"
for b in trainletctl trainlet-agent trainlet-coordinator trainlet-exec trainlet-step trainlet-pmix mpi-allreduce; do
  [ -x "$BIN_DIR/$b" ] || die "$BIN_DIR/$b not built"
done

if [ -n "$BASE_PMIX" ]; then
  [ -x "$BASE_PMIX" ] || die "--base-pmix: $BASE_PMIX is not an executable"
  BASE_PMIX=$(cd "$(dirname "$BASE_PMIX")" && pwd)/$(basename "$BASE_PMIX")
fi
export TRAINLET_BIN=$BIN_DIR TRAINLET_SOURCE_DIR=$SRC
unset TRAINLET_TEST_FORCE_LOOPBACK
# lib.sh: WORK, CTL, wait_for, EXTRA_PIDS and the EXIT trap that stops those PIDs, removes the
# namespaces (netns_cleanup) and WORK. We wrap the trap to undo our one change outside WORK.
source "$SRC/tests/integration/lib.sh"
source "$SRC/tests/integration/netns_lib.sh"
source "$HERE/slurm_netns.sh"
# One more agent key, for the single-node row's agent (started at the end, so that no 3-node job
# is placed on it): the coordinator reads its allowlist when it starts.
eval "$(declare -f netns_make_keys | sed '1s/netns_make_keys/netns_make_keys_base/')"
netns_make_keys() {
  netns_make_keys_base "$@"
  "$CTL" keys create --role agent --name node-single --dir "$TRAINLET_HOME/keys" \
    --allowlist "$TRAINLET_HOME/keys/agents.allow" > /dev/null
}
MADE_RUN_SSHD=0
bench_exit() {
  local rc=$?
  set +e  # under -e, the `(exit $rc)` that hands cleanup our status would end the trap early
  if [ "$MADE_RUN_SSHD" = 1 ]; then rmdir /run/sshd 2>/dev/null || true; fi
  slurm_netns_down
  if [ -n "$LOGS_DIR" ]; then
    mkdir -p "$LOGS_DIR" && cp -r "$TRAINLET_HOME/logs/." "$WORK"/*.yaml "$LOGS_DIR/" 2>/dev/null
    if [ -n "$SLURM_DIR" ]; then cp -r "$SLURM_DIR/log" "$LOGS_DIR/slurm" 2>/dev/null; fi
  fi
  (exit $rc)
  cleanup
}
trap bench_exit EXIT

now() { echo "$EPOCHREALTIME"; }
elapsed_ms() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", (b - a) * 1000 }'; }

# check_ranks LABEL OUTPUT [RANKS]: RANKS (default 6) ranks with the right sum; with 6, at least
# one on each of host1..3.
check_ranks() {
  local label=$1 out=$2 n=${3:-6} ok h sum pattern
  sum=$((n * (n + 1) / 2))
  pattern="allreduce sum $sum (expected $sum) OK"
  [ -z "${RANK_LINE:-}" ] || pattern=$RANK_LINE  # --profile's fence program says "fence rank"
  ok=$(grep -c "$pattern" <<<"$out" || true)
  [ "$ok" = "$n" ] || fail "$label: expected $n ranks saying '$pattern', got $ok; output:
$out"
  [ "$n" = 6 ] || return 0
  for h in host1 host2 host3; do
    grep -q " on $h: " <<<"$out" || fail "$label: no rank ran on $h; output:
$out"
  done
}

# ---- hosts and the trainlet cluster -----------------------------------------------------------
# With --base-pmix the agents run from a copy of the bin directory, whose trainlet-pmix
# use_pmix swaps (a rename: a step starting at that moment gets the old or the new file whole).
if [ -n "$BASE_PMIX" ]; then
  mkdir -p "$WORK/bin"
  for b in trainletctl trainlet-agent trainlet-coordinator trainlet-exec trainlet-step \
      trainlet-pmix trainlet-initializer mpi-allreduce; do
    [ ! -e "$BIN_DIR/$b" ] || cp -a "$BIN_DIR/$b" "$WORK/bin/"
  done
  cp "$BIN_DIR/trainlet-pmix" "$WORK/bin/trainlet-pmix.new"
  cp "$BASE_PMIX" "$WORK/bin/trainlet-pmix.base"
  BIN_DIR=$WORK/bin
  export TRAINLET_BIN=$BIN_DIR
  CTL="$BIN_DIR/trainletctl"
fi
use_pmix() {  # use_pmix new|base
  cp "$WORK/bin/trainlet-pmix.$1" "$WORK/bin/trainlet-pmix.tmp"
  mv -f "$WORK/bin/trainlet-pmix.tmp" "$WORK/bin/trainlet-pmix"
}
start_netns_cluster 3
[ "$NETNS_MODE" = netns ] || fail "network namespaces are not allowed here (got $NETNS_MODE mode); \
the SSH peer needs one sshd per host on port 22, so this benchmark does not run on loopback aliases"
SUBNET="$NETNS_SUBNET.0/24"
if [ "$LO_QUICKACK" = 1 ]; then
  for ns in "${NETNS_NAMES[@]}"; do
    for dst in 127.0.0.1 127.0.0.0/8; do
      ip netns exec "$ns" ip route change local "$dst" dev lo table local proto kernel scope host \
        src 127.0.0.1 quickack 1 || fail "--lo-quickack: cannot set the quickack route in $ns"
    done
  done
  echo "loopback of host1..3: delayed ACKs off (route quickack)"
fi
echo "hosts: ${NETNS_HOSTS[*]} (host1..3), bridge $NETNS_BRIDGE, coordinator in the root namespace"

# ---- the SSH peer -----------------------------------------------------------------------------
SSH_DIR="$WORK/ssh"
mkdir -p "$SSH_DIR"
chmod 700 "$SSH_DIR"
ssh-keygen -q -t ed25519 -N "" -C trainlet-bench-host -f "$SSH_DIR/host_key"
ssh-keygen -q -t ed25519 -N "" -C trainlet-bench-client -f "$SSH_DIR/client_key"
if [ ! -d /run/sshd ]; then mkdir -p /run/sshd && chmod 755 /run/sshd && MADE_RUN_SSHD=1; fi
for i in 1 2 3; do
  cat > "$SSH_DIR/sshd_config.$i" <<EOF
Port 22
ListenAddress ${NETNS_HOSTS[$((i - 1))]}
HostKey $SSH_DIR/host_key
AuthorizedKeysFile $SSH_DIR/client_key.pub
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
UseDNS no
PrintMotd no
PrintLastLog no
PidFile $SSH_DIR/sshd.$i.pid
LogLevel ERROR
EOF
  "$SSHD" -t -f "$SSH_DIR/sshd_config.$i" 2> "$SSH_DIR/sshd.$i.check" \
    || fail "sshd rejects its config: $(cat "$SSH_DIR/sshd.$i.check")"
  netns_host_cmd "$i" "host$i"
  "${NETNS_CMD[@]}" "$SSHD" -D -e -f "$SSH_DIR/sshd_config.$i" > "$SSH_DIR/sshd.$i.log" 2>&1 &
  EXTRA_PIDS+=($!)
done
SSH_AGENT_CMD="ssh -i $SSH_DIR/client_key -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -F /dev/null -o BatchMode=yes -o LogLevel=ERROR"
netns_host_cmd 1 host1
ON_HOST1=("${NETNS_CMD[@]}")
# Every sshd answers from host1 with its own hostname, or we say why not and stop.
for i in 1 2 3; do
  addr=${NETNS_HOSTS[$((i - 1))]}
  # shellcheck disable=SC2086  # the agent command is split into words on purpose, as mpirun does
  if ! wait_for 10 "${ON_HOST1[@]}" $SSH_AGENT_CMD -o ConnectTimeout=2 "$addr" true; then
    got=$("${ON_HOST1[@]}" $SSH_AGENT_CMD -o ConnectTimeout=2 "$addr" hostname 2>&1 || true)
    fail "sshd on host$i ($addr) does not accept the bench key: $got
sshd log: $(cat "$SSH_DIR/sshd.$i.log")"
  fi
  # shellcheck disable=SC2086
  name=$("${ON_HOST1[@]}" $SSH_AGENT_CMD "$addr" hostname)
  [ "$name" = "host$i" ] || fail "ssh to $addr reached '$name', not host$i"
done
echo "sshd up on host1..3 (port 22, keys in $SSH_DIR)"
for addr in "${NETNS_HOSTS[@]}"; do echo "$addr slots=2"; done > "$SSH_DIR/hostfile"

# ---- the Slurm peer --------------------------------------------------------------------------
SRUN_WHY=""
if [ "$SRUN" = 0 ]; then
  SRUN_WHY="left out (--no-srun)"
elif slurm_netns_up; then
  echo "slurm up: slurmctld in the root namespace, slurmd on host1..3 (SLURM_CONF=$SLURM_CONF)"
else
  SRUN_WHY="Slurm across the namespace hosts did not come up: $SLURM_WHY"
  echo "srun contender left out: $SRUN_WHY" >&2
fi

# ---- the contenders ---------------------------------------------------------------------------
# All: the same binary, 6 ranks, btl self,tcp, TCP pinned to the bridge subnet.
MPIRUN_ARGS=(mpirun --allow-run-as-root -np 6 --mca btl self,tcp)
PROGRAM="$BIN_DIR/mpi-allreduce"

# job_env_yaml: the env entries every benchmark TrainJob carries (TCP on the bridge, --mpi-env).
job_env_yaml() {
  local kv
  printf '      - {name: OMPI_MCA_btl_tcp_if_include, value: "%s"}\n' "$SUBNET"
  printf '      - {name: OMPI_MCA_oob_tcp_if_include, value: "%s"}\n' "$SUBNET"
  for kv in "${MPI_ENV[@]}" "${TRACE_ENV[@]}"; do
    printf '      - {name: %s, value: "%s"}\n' "${kv%%=*}" "${kv#*=}"
  done
}
TRACE_ENV=()  # --trace: LD_PRELOAD of mpi_trace.c, for every contender's ranks

# write_direct_job NAME NODES PROCS BTL -> path: NODES x PROCS ranks of the program itself on the
# mpi-direct runtime (docs/runtimes.md, "Direct launch"), btl BTL.
write_direct_job() {
  local file="$WORK/$1.yaml"
  {
    printf 'apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata:\n  name: %s\n' "$1"
    printf 'spec:\n  runtimeRef:\n    name: mpi-direct\n  trainer:\n'
    printf '    numNodes: %s\n    numProcPerNode: %s\n    env:\n' "$2" "$3"
    printf '      - {name: OMPI_MCA_btl, value: "%s"}\n' "$4"
    job_env_yaml
    printf '    command:\n      - "%s"\n' "$PROGRAM"
  } > "$file"
  echo "$file"
}

# write_trainjob NAME [COMMAND...] -> path; the command defaults to the benchmark's mpirun.
write_trainjob() {
  local file="$WORK/$1.yaml" a
  local cmd=("${@:2}")
  [ ${#cmd[@]} -gt 0 ] || cmd=("${MPIRUN_ARGS[@]}" "$PROGRAM")
  {
    printf 'apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata:\n  name: %s\n' "$1"
    # mpirun's launcher even for /bin/true (the control-plane probe), which would otherwise be
    # started directly (docs/runtimes.md, "Direct launch").
    printf '  annotations:\n    trainlet.io/mpi-launch: mpirun\n'
    printf 'spec:\n  runtimeRef:\n    name: mpi-distributed\n  trainer:\n'
    printf '    numNodes: 3\n    numProcPerNode: 2\n    env:\n'
    job_env_yaml
    printf '    command:\n'
    for a in "${cmd[@]}"; do printf '      - "%s"\n' "$a"; done
  } > "$file"
  echo "$file"
}

# run_trainlet NAME [FILE [RANKS]]: prints the milliseconds from apply to Complete; fails on
# anything else. FILE defaults to the mpirun job (write_trainjob), RANKS to 6.
run_trainlet() {
  local name=$1 file=${2:-} ranks=${3:-6} t0 t1 out
  [ -n "$file" ] || file=$(write_trainjob "$name")
  t0=$(now)
  # One CLI process that submits and blocks until Complete, as `sbatch --wait` or `mpirun` block.
  if ! "$CTL" apply -f "$file" --wait --timeout=120s > /dev/null; then
    fail "trainlet run $name did not complete: $("$CTL" describe trainjob "$name" 2>&1)
$("$CTL" logs "$name" 2>&1 || true)"
  fi
  t1=$(now)
  out=$("$CTL" logs "$name")
  printf '%s\n' "$out" > "$WORK/$name.out"
  echo "$t0 $t1" > "$WORK/$name.times"
  check_ranks "trainlet run $name" "$out" "$ranks"
  "$CTL" delete trainjob "$name" --timeout 60s > /dev/null
  elapsed_ms "$t0" "$t1"
}

# run_ssh LABEL [AGENT]: prints the milliseconds of the whole mpirun from host1 over the hostfile,
# remote daemons started by AGENT (default: ssh); fails unless it exits 0 with 6 ranks.
run_ssh() {
  local label=$1 agent=${2:-$SSH_AGENT_CMD} t0 t1 out rc=0
  t0=$(now)
  "${ON_HOST1[@]}" env "${SHARED_MCA[@]}" "${TRACE_ENV[@]}" "${MPIRUN_ARGS[@]}" --hostfile "$SSH_DIR/hostfile" \
    --mca btl_tcp_if_include "$SUBNET" --mca oob_tcp_if_include "$SUBNET" \
    --mca plm_rsh_agent "$agent" "$PROGRAM" < /dev/null > "$WORK/$label.out" 2>&1 || rc=$?
  t1=$(now)
  out=$(cat "$WORK/$label.out")
  echo "$t0 $t1" > "$WORK/$label.times"
  [ "$rc" = 0 ] || fail "ssh run $label: mpirun exited $rc; output:
$out"
  check_ranks "ssh run $label" "$out"
  elapsed_ms "$t0" "$t1"
}

# run_direct NAME: run_trainlet for the 3 x 2 direct-launch job.
run_direct() {
  run_trainlet "$1" "$(write_direct_job "$1" 3 2 self,tcp)"
}

# run_floor LABEL: prints the milliseconds from spawning the 6 ranks on host1, under one
# trainlet-pmix started beforehand for one node of 6 ranks (mpi_floor.py), to the last one's exit;
# fails unless all exit 0 and 6 print the right sum. The ranks get direct launch's env: the
# shared MCA settings, btl self,tcp on the bridge subnet, the daemon URI that makes OpenMPI take
# them for PMIx clients and `orte_bound_at_launch` (which spares MPI_Init the topology); and
# `mpi_yield_when_idle=0`, which trainlet-pmix would otherwise turn on for 6 ranks on a node of 2
# CPUs, where each host's 2 ranks under the contenders busy-poll.
FLOOR_XML=""  # the node's topology, handed to the floor's server as the agents hand it over
if [ "$FLOOR" = 1 ] && command -v lstopo-no-graphics > /dev/null; then
  FLOOR_XML="$WORK/floor-topology.xml"
  lstopo-no-graphics --of xml > "$FLOOR_XML" || FLOOR_XML=""
fi
run_floor() {
  local label=$1 times ok
  times=$("${ON_HOST1[@]}" env "${SHARED_MCA[@]}" "${TRACE_ENV[@]}" OMPI_MCA_btl=self,tcp \
    OMPI_MCA_btl_tcp_if_include="$SUBNET" OMPI_MCA_oob_tcp_if_include="$SUBNET" \
    "OMPI_MCA_orte_local_daemon_uri=1.0;tcp://127.0.0.1:1" OMPI_MCA_orte_bound_at_launch=1 \
    OMPI_MCA_mpi_yield_when_idle=0 \
    ${FLOOR_XML:+TRAINLET_PMIX_TOPOLOGY_XML=$FLOOR_XML} \
    python3 "$HERE/mpi_floor.py" --pmix "$BIN_DIR/trainlet-pmix" --program "$PROGRAM" \
    --ranks 6 --work "$WORK/floor-work" --out "$WORK/$label.out") \
    || fail "floor run $label: $(cat "$WORK/$label.out" 2>/dev/null)"
  echo "$times" > "$WORK/$label.times"
  ok=$(grep -c "${RANK_LINE:-allreduce sum 21 (expected 21) OK}" "$WORK/$label.out" || true)
  [ "$ok" = 6 ] || fail "floor run $label: expected 6 ranks, got $ok: $(cat "$WORK/$label.out")"
  elapsed_ms ${times}
}

# run_base NAME: run_direct with the --base-pmix server.
run_base() {
  local ms
  use_pmix base
  ms=$(run_direct "$1") || { use_pmix new; return 1; }
  use_pmix new
  echo "$ms"
}

# run_srun LABEL: prints the milliseconds of the whole `srun --mpi=pmix` from host1; fails unless
# it exits 0 with 6 ranks. The ranks get the SSH contender's MCA settings through the env.
run_srun() {
  local label=$1 t0 t1 out rc=0
  t0=$(now)
  "${ON_HOST1[@]}" env "${SHARED_MCA[@]}" "${TRACE_ENV[@]}" OMPI_MCA_btl=self,tcp \
    OMPI_MCA_btl_tcp_if_include="$SUBNET" OMPI_MCA_oob_tcp_if_include="$SUBNET" \
    srun --mpi=pmix -N 3 -n 6 --ntasks-per-node=2 "$PROGRAM" \
    < /dev/null > "$WORK/$label.out" 2>&1 || rc=$?
  t1=$(now)
  out=$(cat "$WORK/$label.out")
  echo "$t0 $t1" > "$WORK/$label.times"
  [ "$rc" = 0 ] || fail "srun run $label: srun exited $rc; output:
$out"
  check_ranks "srun run $label" "$out"
  elapsed_ms "$t0" "$t1"
}

# ---- the MPI settings all contenders run with ------------------------------------------------
# The mpi runtime gives its launcher OpenMPI start-up defaults chosen from what the placed nodes
# report (plugins/runtime/mpi, docs/runtimes.md). The SSH contender gets the very same OMPI_MCA_*
# values, read here from a launcher's environment, so the ratio compares launch paths and not MPI
# tuning. Left out: the four that say how and where mpirun launches (rsh agent, hostfile, slots,
# host names), which the SSH contender sets its own way.
"$CTL" apply -f "$(write_trainjob bench-env /bin/sh -c env)" > /dev/null
"$CTL" wait trainjob/bench-env --for=condition=Complete --timeout=60s > /dev/null \
  || fail "the env job did not complete: $("$CTL" describe trainjob bench-env 2>&1)"
SHARED_MCA=()
while IFS= read -r kv; do SHARED_MCA+=("$kv"); done < <("$CTL" logs bench-env \
  | grep -o 'OMPI_MCA_[A-Za-z0-9_]*=.*' \
  | grep -v -E '^OMPI_MCA_(plm_rsh_agent|orte_default_hostfile|orte_keep_fqdn_hostnames|orte_set_default_slots)=' \
  | sort)
"$CTL" delete trainjob bench-env --timeout 60s > /dev/null
echo "MPI settings of all contenders (besides btl self,tcp and the subnet): ${SHARED_MCA[*]:-none}"

echo "warm-up (untimed): one run of each"
run_direct direct-warmup > /dev/null
[ -z "$BASE_PMIX" ] || run_base base-warmup > /dev/null
run_trainlet bench-warmup > /dev/null
run_ssh ssh-warmup > /dev/null
[ -n "$SRUN_WHY" ] || run_srun srun-warmup > /dev/null
[ "$FLOOR" = 0 ] || run_floor floor-warmup > /dev/null

DIRECT_MS=()
TRAINLET_MS=()
SSH_MS=()
SRUN_MS=()
BASE_MS=()
FLOOR_MS=()
for r in $(seq 1 "$REPS"); do
  d=$(run_direct "direct-$r")
  b=-
  [ -z "$BASE_PMIX" ] || { b=$(run_base "base-$r"); BASE_MS+=("$b"); }
  t=$(run_trainlet "bench-$r")
  s=$(run_ssh "ssh-$r")
  u=-
  [ -n "$SRUN_WHY" ] || u=$(run_srun "srun-$r")
  f=-
  [ "$FLOOR" = 0 ] || { f=$(run_floor "floor-$r"); FLOOR_MS+=("$f"); }
  DIRECT_MS+=("$d")
  TRAINLET_MS+=("$t")
  SSH_MS+=("$s")
  [ -n "$SRUN_WHY" ] || SRUN_MS+=("$u")
  printf 'rep %d/%d: direct %s ms, direct (base pmix) %s ms, trainlet %s ms, ssh %s ms, srun %s ms, floor %s ms (load %s)\n' \
    "$r" "$REPS" "$d" "$b" "$t" "$s" "$u" "$f" "$(cut -d' ' -f1 /proc/loadavg)"
done

# ---- the table --------------------------------------------------------------------------------
python3 - "$REPS" "${DIRECT_MS[*]}" "${TRAINLET_MS[*]}" "${SSH_MS[*]}" "${SRUN_MS[*]:-}" \
  "$SRUN_WHY" "${BASE_MS[*]:-}" "${FLOOR_MS[*]:-}" <<'EOF'
import statistics, sys
reps = int(sys.argv[1])
d, t, s = ([float(x) for x in a.split()] for a in sys.argv[2:5])
u = [float(x) for x in sys.argv[5].split()]
why = sys.argv[6]
b = [float(x) for x in sys.argv[7].split()]
fl = [float(x) for x in sys.argv[8].split()]
dm, tm, sm = statistics.median(d), statistics.median(t), statistics.median(s)
print()
print(f"3 hosts x 2 ranks, allreduce example, {reps} reps each (after one warm-up each), interleaved")
print()
print("| contender | median | min | / ssh (median) | / direct (median) |")
print("| --- | ---: | ---: | ---: | ---: |")
def row(name, xs):
    m = statistics.median(xs)
    print(f"| {name} | {m:.0f} ms | {min(xs):.0f} ms | {m / sm:.2f} | {m / dm:.2f} |")
row("direct launch (mpi-direct, PMIx), apply -> Complete", d)
if b:
    row("direct launch with the --base-pmix server", b)
row("mpirun through trainlet-exec, apply -> Complete", t)
row("mpirun over SSH", s)
if fl:
    row("MPI floor: the 6 ranks spawned at once on host1, no launcher, fences in one server", fl)
if u:
    row("srun --mpi=pmix", u)
else:
    print(f"| srun --mpi=pmix | - | - | - | - |")
    print()
    print(f"srun: not run: {why}")
if fl:
    fm = statistics.median(fl)
    print()
    print(f"floor / ssh {fm / sm:.2f}: the MPI part alone, against the 0.15 target; "
          f"direct - floor {dm - fm:.0f} ms, 0.15 x ssh - floor {0.15 * sm - fm:.0f} ms")
print()
v1 = "MET" if dm <= 0.15 * sm else "NOT MET"
v2 = "MET" if tm >= 2 * dm else "NOT MET"
v3 = "MET" if tm <= 0.5 * sm else "NOT MET"
print(f"target: direct at most 0.15x SSH: {v1} (direct / ssh {dm / sm:.2f})")
print(f"target: direct at least 2x faster than mpirun through trainlet-exec: {v2} "
      f"(trainlet / direct {tm / dm:.2f})")
print(f"target (earlier): mpirun through trainlet-exec at most half of SSH: {v3} "
      f"(trainlet / ssh {tm / sm:.2f})")
EOF

# profile_table RANKS NAME...: the medians of each span over the runs NAME (their .times and
# .out files in WORK; the contender is NAME's second word: prof-direct-3 is "direct").
profile_table() {
  python3 - "$WORK" "$@" <<'PYEOF'
import re, statistics, sys
work, want, names = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
spans = {}
for name in names:
    kind = name.split("-")[1]
    t0, t1 = (float(x) * 1e6 for x in open(f"{work}/{name}.times").read().split())
    ranks = [tuple(int(x) for x in m) for m in re.findall(
        r"timing rank \d+ of \d+ on \S+: start (\d+) main (\d+) init (\d+) coll (\d+) fin (\d+)",
        open(f"{work}/{name}.out").read())]
    if len(ranks) != want:
        sys.exit(f"profile: {name}: expected {want} timing lines, got {len(ranks)}")
    start, main, init, coll, fin = (list(c) for c in zip(*ranks))
    row = [min(start) - t0, max(main) - min(start), max(init) - max(main),
           max(coll) - max(init), max(fin) - max(coll), t1 - max(fin), t1 - t0]
    spans.setdefault(kind, []).append(row)
heads = ["launcher -> first rank's process", "-> every rank in main()", "MPI_Init (the last one out)",
         "allreduce + barrier", "MPI_Finalize", "last rank's exit -> launcher returns", "total"]
kinds = [k for k in ("direct", "base", "mpirun", "ssh", "srun", "floor", "single") if k in spans]
label = {"direct": "direct", "base": "direct, base pmix", "mpirun": "mpirun via trainlet-exec",
         "ssh": "mpirun over SSH",
         "srun": "srun --mpi=pmix", "floor": "MPI floor (no launcher)", "single": f"direct, {want} ranks on one agent"}
print(f"profile, {want} ranks: medians over {len(spans[kinds[0]])} runs each, ms "
      "(process start from /proc: 10 ms ticks)")
print()
print("| span | " + " | ".join(label[k] for k in kinds) + " |")
print("| --- |" + " ---: |" * len(kinds))
for i, h in enumerate(heads):
    print(f"| {h} | " + " | ".join(f"{statistics.median(r[i] for r in spans[k]) / 1000:.0f}" for k in kinds) + " |")
PYEOF
}

# ---- the optional analyses: --profile, --trace, --probe (analyses.sh) ---------------------------
source "$HERE/analyses.sh"

# ---- one agent, 64 ranks: direct launch against the spawn floor plus one MPI_Init ----------------
# An agent in the root namespace with SINGLE_RANKS slots (the namespace hosts' agents have 4, so
# only it can take the job), started only now so that no 3-node job above was placed on it. The
# ranks use shared memory (btl self,vader), as do the singletons of the floor.
if [ "$SINGLE" = 1 ]; then
  echo
  keys="$TRAINLET_HOME/keys"
  agent_ep=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["agent_endpoint"])' "$TRAINLET_HOME/endpoints.json")
  "$BIN_DIR/trainlet-agent" --name node-single --address "$NETNS_SUBNET.1" \
    --coordinator "$agent_ep" --coordinator-key "$keys/coordinator.key.pub" \
    --key "$keys/node-single.key" --state-dir "$TRAINLET_HOME/agents/node-single" \
    --slots "$SINGLE_RANKS" --heartbeat-ms 200 --metrics-address "" \
    > "$TRAINLET_HOME/logs/node-single.log" 2>&1 &
  EXTRA_PIDS+=($!)
  wait_for 20 sh -c "[ \$('$CTL' get nodes 2>/dev/null | grep -c ' Ready ') = 4 ]" \
    || fail "node-single did not become Ready: $("$CTL" get nodes 2>&1)"
  # floor_once: prints "SPAWN_MS INIT_MS SINGLETONS_MS": a posix_spawn loop of SINGLE_RANKS
  # /bin/true waited for; one isolated singleton of the program (its MPI_Init without any
  # launcher or daemon: the cost one rank's MPI_Init has on its own); SINGLE_RANKS such singletons
  # at once. Timed inside python, so its start-up is not counted; any non-zero exit stops us.
  floor_once() {
    python3 - "$PROGRAM" "$SINGLE_RANKS" "$WORK/floor" <<'PYEOF'
import os, sys, tempfile, time
prog, n = sys.argv[1], int(sys.argv[2])
os.makedirs(sys.argv[3], exist_ok=True)
base = tempfile.mkdtemp(dir=sys.argv[3])
# Each singleton its own session-dir base, as ranks on different hosts would have: singletons
# started together would otherwise race on one /tmp/ompi.HOST.UID tree (one removes what
# another is creating).
envs = []
for i in range(n):
    os.makedirs(f"{base}/{i}")
    envs.append(dict(os.environ, OMPI_MCA_ess_singleton_isolated="1", OMPI_MCA_pml="ob1",
                     OMPI_MCA_btl="self,vader", OMPI_MCA_orte_tmpdir_base=f"{base}/{i}"))
quiet = [(os.POSIX_SPAWN_OPEN, 1, "/dev/null", os.O_WRONLY, 0)]
def spawn_wait(argv, count):
    t0 = time.perf_counter()
    pids = [os.posix_spawn(argv[0], argv, envs[i], file_actions=quiet) for i in range(count)]
    for p in pids:
        _, st = os.waitpid(p, 0)
        if st != 0:
            sys.exit(f"floor: {argv[0]} exited with status {st}")
    return (time.perf_counter() - t0) * 1000
print(f"{spawn_wait(['/bin/true'], n):.1f} {spawn_wait([prog], 1):.1f} {spawn_wait([prog], n):.1f}")
PYEOF
  }
  echo "single node: warm-up (untimed), then $REPS reps of the floor and of $SINGLE_RANKS ranks by direct launch"
  floor_once > /dev/null || fail "the floor did not run"
  run_trainlet single-warmup "$(write_direct_job single-warmup 1 "$SINGLE_RANKS" self,vader)" \
    "$SINGLE_RANKS" > /dev/null
  FLOOR_ROWS=()
  SINGLE_MS=()
  SINGLE_BASE_MS=()
  for r in $(seq 1 "$REPS"); do
    f=$(floor_once) || fail "the floor did not run"
    m=$(run_trainlet "single-$r" "$(write_direct_job "single-$r" 1 "$SINGLE_RANKS" self,vader)" "$SINGLE_RANKS")
    b=-
    if [ -n "$BASE_PMIX" ]; then
      use_pmix base
      b=$(run_trainlet "single-base-$r" \
        "$(write_direct_job "single-base-$r" 1 "$SINGLE_RANKS" self,vader)" "$SINGLE_RANKS")
      use_pmix new
      SINGLE_BASE_MS+=("$b")
    fi
    FLOOR_ROWS+=("$f")
    SINGLE_MS+=("$m")
    printf 'rep %d/%d: floor (spawn, one MPI_Init, %d singletons) %s ms, direct %s ms, direct (base pmix) %s ms\n' \
      "$r" "$REPS" "$SINGLE_RANKS" "$f" "$m" "$b"
  done
  python3 - "$SINGLE_RANKS" "$(printf '%s\n' "${FLOOR_ROWS[@]}")" "${SINGLE_MS[*]}" \
    "${SINGLE_BASE_MS[*]:-}" <<'PYEOF'
import statistics, sys
n = int(sys.argv[1])
rows = [[float(x) for x in l.split()] for l in sys.argv[2].splitlines()]
spawn = [r[0] for r in rows]
init = [r[1] for r in rows]
singles = [r[2] for r in rows]
floor = [r[0] + r[1] for r in rows]
d = [float(x) for x in sys.argv[3].split()]
fm = statistics.median(floor)
print()
print(f"one agent, {n} ranks, allreduce example, {len(d)} reps each (after one warm-up), interleaved")
print()
print("| | median | min | x floor (median) |")
print("| --- | ---: | ---: | ---: |")
def row(name, xs):
    m = statistics.median(xs)
    print(f"| {name} | {m:.0f} ms | {min(xs):.0f} ms | {m / fm:.2f} |")
row(f"posix_spawn loop, {n} x /bin/true", spawn)
row("one MPI_Init: one isolated singleton of the program", init)
row(f"**floor**: spawn loop + one MPI_Init (per rep)", floor)
row(f"{n} isolated singletons at once (each its own MPI_Init, no wire-up)", singles)
row(f"direct launch, {n} ranks, apply -> Complete", d)
b = [float(x) for x in sys.argv[4].split()]
if b:
    row(f"direct launch, {n} ranks, with the --base-pmix server", b)
PYEOF
  if [ "$PROFILE" = 1 ]; then
    echo
    ALLREDUCE=$PROGRAM
    PROGRAM="$WORK/launch-timing"
    names=()
    for r in $(seq 1 "$REPS"); do
      run_trainlet "prof-single-$r" "$(write_direct_job "prof-single-$r" 1 "$SINGLE_RANKS" self,vader)" \
        "$SINGLE_RANKS" > /dev/null
      names+=("prof-single-$r")
    done
    PROGRAM=$ALLREDUCE
    profile_table "$SINGLE_RANKS" "${names[@]}"
  fi
fi
