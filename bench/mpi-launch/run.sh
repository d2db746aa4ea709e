#!/usr/bin/env bash
# bench/mpi-launch: the allreduce example (3 hosts x 2 ranks, OpenMPI 4.1) launched two ways on
# the same three namespace hosts, in the same run:
#   trainlet  `trainletctl apply --wait` returning (submitted, then Complete); mpirun
#             runs on host1 and starts its remote daemons through trainlet-exec and the agents.
#   ssh       what Kubeflow's MPI runtime does: an sshd in every host, keys made by this script,
#             and `mpirun` on host1 starting its remote daemons over ssh; the whole mpirun is timed.
# Both run the same binary with the same MCA settings: the SSH contender also gets the OMPI_MCA_*
# defaults the mpi runtime gives its launcher (read from a launcher's env, printed). A run whose
# output lacks 6 correct ranks (on host1..3) stops the benchmark, so no time is reported for a
# failed run.
#
# usage: bench/mpi-launch/run.sh [--reps N] [--bin BUILD/bin] [--probe] [--logs DIR]
#                                [--mpi-env NAME=VALUE]...
#   --reps N   timed repetitions of each contender (default 7), interleaved, after one untimed
#              warm-up of each
#   --bin DIR  the build's bin directory (default $TRAINLET_BIN, else <repo>/build/bin); needs
#              trainletctl, trainlet-agent, trainlet-coordinator, trainlet-exec, mpi-allreduce
#   --probe    afterwards, time the pieces (median of 5): one ssh connection, one trainlet-exec
#              round trip, mpirun alone inside a trainlet job, mpirun with a launch agent that
#              costs nothing (ip netns exec; from outside and from inside a trainlet job, and with
#              each daemon in a session of its own as sshd and trainlet run it), mpirun with all
#              ranks on host1 (the MPI floor), and a trainlet job whose command is /bin/true
#   --mpi-env NAME=VALUE  an OpenMPI setting for both contenders: trainer env of the trainlet jobs
#              (where it wins over the mpi runtime's defaults) and so also the SSH contender's env;
#              e.g. --mpi-env OMPI_MCA_pml= gives OpenMPI its own PML selection back (the "before")
#   --logs DIR copy the coordinator's and agents' logs (millisecond timestamps) and the job
#              files into DIR when the script ends, to see where a run's time went
# Needs root (network namespaces, sshd on port 22 inside them). Not a ctest test.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
REPS=7
PROBE=0
LOGS_DIR=""
MPI_ENV=()
BIN_DIR=${TRAINLET_BIN:-$SRC/build/bin}
while [ $# -gt 0 ]; do
  case "$1" in
    --reps) REPS=${2:?--reps needs a number}; shift 2 ;;
    --reps=*) REPS=${1#--reps=}; shift ;;
    --bin) BIN_DIR=${2:?--bin needs a directory}; shift 2 ;;
    --bin=*) BIN_DIR=${1#--bin=}; shift ;;
    --probe) PROBE=1; shift ;;
    --mpi-env) MPI_ENV+=("${2:?--mpi-env needs NAME=VALUE}"); shift 2 ;;
    --mpi-env=*) MPI_ENV+=("${1#--mpi-env=}"); shift ;;
    --logs) LOGS_DIR=${2:?--logs needs a directory}; shift 2 ;;
    --logs=*) LOGS_DIR=${1#--logs=}; shift ;;
    -h|--help) sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
done
case "$REPS" in ''|*[!0-9]*|0) echo "--reps must be a positive integer, got '$REPS'" >&2; exit 2 ;; esac
for kv in "${MPI_ENV[@]}"; do
  case "$kv" in OMPI_MCA_[A-Za-z0-9_]*=*) ;; *) echo "--mpi-env wants OMPI_MCA_NAME=VALUE, got '$kv'" >&2; exit 2 ;; esac
done

die() { echo "mpi-launch: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "needs root: network namespaces and an sshd on port 22 in each"
for tool in mpirun ssh ssh-keygen ip unshare python3; do
  command -v "$tool" >/dev/null || die "$tool not found (scripts/install-deps installs it)"
done
SSHD=/usr/sbin/sshd
[ -x "$SSHD" ] || die "$SSHD not found: install openssh-server (scripts/install-deps)"
BIN_DIR=$(cd "$BIN_DIR" 2>/dev/null && pwd) || die "--bin: no such directory"
for b in trainletctl trainlet-agent trainlet-coordinator trainlet-exec mpi-allreduce; do
  [ -x "$BIN_DIR/$b" ] || die "$BIN_DIR/$b not built"
done

export TRAINLET_BIN=$BIN_DIR TRAINLET_SOURCE_DIR=$SRC
unset TRAINLET_TEST_FORCE_LOOPBACK
# lib.sh: WORK, CTL, wait_for, EXTRA_PIDS and the EXIT trap that stops those PIDs, removes the
# namespaces (netns_cleanup) and WORK. We wrap the trap to undo our one change outside WORK.
source "$SRC/tests/integration/lib.sh"
source "$SRC/tests/integration/netns_lib.sh"
MADE_RUN_SSHD=0
bench_exit() {
  local rc=$?
  set +e  # under -e, the `(exit $rc)` that hands cleanup our status would end the trap early
  if [ "$MADE_RUN_SSHD" = 1 ]; then rmdir /run/sshd 2>/dev/null || true; fi
  if [ -n "$LOGS_DIR" ]; then
    mkdir -p "$LOGS_DIR" && cp -r "$TRAINLET_HOME/logs/." "$WORK"/*.yaml "$LOGS_DIR/" 2>/dev/null
  fi
  (exit $rc)
  cleanup
}
trap bench_exit EXIT

now() { echo "$EPOCHREALTIME"; }
elapsed_ms() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", (b - a) * 1000 }'; }

# check_ranks LABEL OUTPUT: 6 ranks with the right sum, at least one on each of host1..3.
check_ranks() {
  local label=$1 out=$2 ok h
  ok=$(grep -c "allreduce sum 21 (expected 21) OK" <<<"$out" || true)
  [ "$ok" = 6 ] || fail "$label: expected 6 ranks with sum 21, got $ok; output:
$out"
  for h in host1 host2 host3; do
    grep -q " on $h: " <<<"$out" || fail "$label: no rank ran on $h; output:
$out"
  done
}

# ---- hosts and the trainlet cluster -----------------------------------------------------------
start_netns_cluster 3
[ "$NETNS_MODE" = netns ] || fail "network namespaces are not allowed here (got $NETNS_MODE mode); \
the SSH peer needs one sshd per host on port 22, so this benchmark does not run on loopback aliases"
SUBNET="$NETNS_SUBNET.0/24"
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

# ---- the two contenders -----------------------------------------------------------------------
# Both: the same binary, mpirun -np 6 on host1, btl self,tcp, TCP pinned to the bridge subnet.
MPIRUN_ARGS=(mpirun --allow-run-as-root -np 6 --mca btl self,tcp)
PROGRAM="$BIN_DIR/mpi-allreduce"

# job_env_yaml: the env entries every benchmark TrainJob carries (TCP on the bridge, --mpi-env).
job_env_yaml() {
  local kv
  printf '      - {name: OMPI_MCA_btl_tcp_if_include, value: "%s"}\n' "$SUBNET"
  printf '      - {name: OMPI_MCA_oob_tcp_if_include, value: "%s"}\n' "$SUBNET"
  for kv in "${MPI_ENV[@]}"; do printf '      - {name: %s, value: "%s"}\n' "${kv%%=*}" "${kv#*=}"; done
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

# run_trainlet NAME: prints the milliseconds from apply to Complete; fails on anything else.
run_trainlet() {
  local name=$1 file t0 t1 out
  file=$(write_trainjob "$name")
  t0=$(now)
  # One CLI process that submits and blocks until Complete, as `sbatch --wait` or `mpirun` block.
  if ! "$CTL" apply -f "$file" --wait --timeout=120s > /dev/null; then
    fail "trainlet run $name did not complete: $("$CTL" describe trainjob "$name" 2>&1)
$("$CTL" logs "$name" 2>&1 || true)"
  fi
  t1=$(now)
  out=$("$CTL" logs "$name")
  check_ranks "trainlet run $name" "$out"
  "$CTL" delete trainjob "$name" --timeout 60s > /dev/null
  elapsed_ms "$t0" "$t1"
}

# run_ssh LABEL [AGENT]: prints the milliseconds of the whole mpirun from host1 over the hostfile,
# remote daemons started by AGENT (default: ssh); fails unless it exits 0 with 6 ranks.
run_ssh() {
  local label=$1 agent=${2:-$SSH_AGENT_CMD} t0 t1 out rc=0
  t0=$(now)
  "${ON_HOST1[@]}" env "${SHARED_MCA[@]}" "${MPIRUN_ARGS[@]}" --hostfile "$SSH_DIR/hostfile" \
    --mca btl_tcp_if_include "$SUBNET" --mca oob_tcp_if_include "$SUBNET" \
    --mca plm_rsh_agent "$agent" "$PROGRAM" < /dev/null > "$WORK/$label.out" 2>&1 || rc=$?
  t1=$(now)
  out=$(cat "$WORK/$label.out")
  [ "$rc" = 0 ] || fail "ssh run $label: mpirun exited $rc; output:
$out"
  check_ranks "ssh run $label" "$out"
  elapsed_ms "$t0" "$t1"
}

# ---- the MPI settings both contenders run with ------------------------------------------------
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
echo "MPI settings of both contenders (besides the mpirun arguments): ${SHARED_MCA[*]:-none}"

echo "warm-up (untimed): one run of each"
run_trainlet bench-warmup > /dev/null
run_ssh ssh-warmup > /dev/null

TRAINLET_MS=()
SSH_MS=()
for r in $(seq 1 "$REPS"); do
  t=$(run_trainlet "bench-$r")
  s=$(run_ssh "ssh-$r")
  TRAINLET_MS+=("$t")
  SSH_MS+=("$s")
  printf 'rep %d/%d: trainlet %s ms, ssh %s ms\n' "$r" "$REPS" "$t" "$s"
done

# ---- the table --------------------------------------------------------------------------------
python3 - "$REPS" "${TRAINLET_MS[*]}" "${SSH_MS[*]}" <<'EOF'
import statistics, sys
reps = int(sys.argv[1])
t = [float(x) for x in sys.argv[2].split()]
s = [float(x) for x in sys.argv[3].split()]
tm, sm = statistics.median(t), statistics.median(s)
print()
print(f"3 hosts x 2 ranks, allreduce example, {reps} reps each (after one warm-up each)")
print()
print("| | trainlet: apply -> Complete | mpirun over SSH | trainlet / ssh |")
print("| --- | ---: | ---: | ---: |")
print(f"| median | {tm:.0f} ms | {sm:.0f} ms | {tm / sm:.2f} |")
print(f"| min | {min(t):.0f} ms | {min(s):.0f} ms | {min(t) / min(s):.2f} |")
print()
verdict = "MET" if tm <= 0.5 * sm else "NOT MET"
print(f"target (trainlet median at most half the SSH median): {verdict} "
      f"(ratio {tm / sm:.2f}, target <= 0.50)")
EOF

# ---- where the time goes (optional) -----------------------------------------------------------
if [ "$PROBE" = 1 ]; then
  echo
  echo "probe: the pieces, 5 samples each, median"
  # One ssh connection from host1 to host2 running `true`: TCP + key exchange + auth + session.
  ssh_samples=()
  for _ in 1 2 3 4 5; do
    t0=$(now)
    # shellcheck disable=SC2086
    "${ON_HOST1[@]}" $SSH_AGENT_CMD "${NETNS_HOSTS[1]}" true
    ssh_samples+=("$(elapsed_ms "$t0" "$(now)")")
  done
  # The MPI floor neither launcher can go under: all 6 ranks on host1, no remote daemon at all.
  local_samples=()
  for _ in 1 2 3 4 5; do
    t0=$(now)
    "${ON_HOST1[@]}" env "${SHARED_MCA[@]}" "${MPIRUN_ARGS[@]}" --oversubscribe \
      --host "${NETNS_HOSTS[0]}:6" \
      --mca btl_tcp_if_include "$SUBNET" --mca oob_tcp_if_include "$SUBNET" "$PROGRAM" \
      > "$WORK/local.out" 2>&1 || fail "mpirun on host1 alone: $(cat "$WORK/local.out")"
    local_samples+=("$(elapsed_ms "$t0" "$(now)")")
  done
  # The same 3 x 2 mpirun from host1, its remote daemons started by a launch agent that costs
  # nothing: `ip netns exec` into the host's namespace (own UTS namespace and hostname), no
  # network, no authentication. What a launcher, trainlet's or ssh, adds is its time over this.
  direct="$WORK/direct-agent"
  {
    printf '#!/bin/sh\n# rsh-style: [options] host command...\n'
    printf 'while [ "${1#-}" != "$1" ]; do shift; done\nh=$1; shift\ncase $h in\n'
    for i in 2 3; do
      printf '  %s) exec ip netns exec %s unshare --uts sh -c "hostname host%s; $*" ;;\n' \
        "${NETNS_HOSTS[$((i - 1))]}" "${NETNS_NAMES[$((i - 1))]}" "$i"
    done
    printf 'esac\necho "direct-agent: unknown host $h" >&2\nexit 255\n'
  } > "$direct"
  chmod +x "$direct"
  # The same, but the daemon in a session of its own, as sshd and trainlet's agents run it. On
  # one machine standing in for three, the scheduler shares the CPUs between sessions
  # (autogroup), not between processes: this, not the launch path, is most of what mpirun in a
  # trainlet job takes over the free launcher (bench/README.md).
  direct_setsid="$WORK/direct-agent-setsid"
  sed 's/unshare --uts sh -c/unshare --uts setsid -w sh -c/' "$direct" > "$direct_setsid"
  chmod +x "$direct_setsid"
  direct_samples=()
  setsid_samples=()
  for i in 1 2 3 4 5; do
    direct_samples+=("$(run_ssh "direct-$i" "$direct")")
    setsid_samples+=("$(run_ssh "setsid-$i" "$direct_setsid")")
  done
  # Inside a trainlet job on host1: trainlet-exec to host2 running `true`, then mpirun alone.
  probe="$WORK/probe.yaml"
  {
    printf 'apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata:\n  name: bench-probe\n'
    printf 'spec:\n  runtimeRef:\n    name: mpi-distributed\n  trainer:\n'
    printf '    numNodes: 3\n    numProcPerNode: 2\n    env:\n'
    job_env_yaml
    printf '    command:\n      - /bin/sh\n      - -c\n      - |\n'
    printf '        for i in 1 2 3 4 5; do a=$(date +%%s%%N); "%s" %s true; b=$(date +%%s%%N); echo "exec_ns=$((b - a))"; done\n' \
      "$BIN_DIR/trainlet-exec" "${NETNS_HOSTS[1]}"
    printf '        for i in 1 2 3 4 5; do a=$(date +%%s%%N); %s "%s" > /dev/null; b=$(date +%%s%%N); echo "mpirun_ns=$((b - a))"; done\n' \
      "${MPIRUN_ARGS[*]}" "$PROGRAM"
    printf '        for i in 1 2 3 4 5; do a=$(date +%%s%%N); OMPI_MCA_plm_rsh_agent=%s %s "%s" > /dev/null; b=$(date +%%s%%N); echo "direct_in_job_ns=$((b - a))"; done\n' \
      "$direct" "${MPIRUN_ARGS[*]}" "$PROGRAM"
  } > "$probe"
  "$CTL" apply -f "$probe" > /dev/null
  "$CTL" wait trainjob/bench-probe --for=condition=Complete --timeout=180s > /dev/null \
    || fail "probe job: $("$CTL" logs bench-probe 2>&1)"
  plog=$("$CTL" logs bench-probe)
  python3 - "${ssh_samples[*]}" "$plog" "${local_samples[*]}" "${direct_samples[*]}" \
    "${setsid_samples[*]}" <<'EOF'
import statistics, sys
ssh = [float(x) for x in sys.argv[1].split()]
local = [float(x) for x in sys.argv[3].split()]
direct = [float(x) for x in sys.argv[4].split()]
setsid = [float(x) for x in sys.argv[5].split()]
lines = sys.argv[2].splitlines()
def grab(key):
    return [int(l.split(key + "=")[1]) / 1e6 for l in lines if key + "=" in l]
ex, mp, dj = grab("exec_ns"), grab("mpirun_ns"), grab("direct_in_job_ns")
if len(ex) != 5 or len(mp) != 5 or len(dj) != 5:
    sys.exit(f"probe: expected 5 samples of each, got {len(ex)} exec and {len(mp)} mpirun:\n{sys.argv[2]}")
print(f"ssh host1 -> host2 `true`:                 {statistics.median(ssh):.0f} ms")
print(f"trainlet-exec host1 -> host2 `true`:       {statistics.median(ex):.0f} ms")
print(f"mpirun alone inside a trainlet job:        {statistics.median(mp):.0f} ms")
print(f"mpirun, launch agent `ip netns exec`:      {statistics.median(direct):.0f} ms")
print(f"  the same, run from inside a trainlet job: {statistics.median(dj):.0f} ms")
print(f"  the same, each daemon in its own session:  {statistics.median(setsid):.0f} ms")
print(f"mpirun, all 6 ranks on host1 (no remote):  {statistics.median(local):.0f} ms")
EOF
  "$CTL" delete trainjob bench-probe --timeout 60s > /dev/null
  # The control plane alone: the same 3 x 2 job on mpi-distributed whose command is /bin/true.
  true_samples=()
  for i in 1 2 3 4 5; do
    f=$(write_trainjob "bench-true-$i" /bin/true)
    t0=$(now)
    "$CTL" apply -f "$f" > /dev/null
    "$CTL" wait "trainjob/bench-true-$i" --for=condition=Complete --timeout=60s > /dev/null \
      || fail "probe job bench-true-$i did not complete"
    true_samples+=("$(elapsed_ms "$t0" "$(now)")")
    "$CTL" delete trainjob "bench-true-$i" --timeout 60s > /dev/null
  done
  python3 -c 'import statistics, sys; print(f"trainlet apply -> Complete, /bin/true:    {statistics.median(map(float, sys.argv[1:])):.0f} ms")' \
    "${true_samples[@]}"
fi
