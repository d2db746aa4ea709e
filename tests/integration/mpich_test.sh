#!/usr/bin/env bash
# MPICH through hydra without SSH: Debian's real MPICH (mpirun.mpich, the allreduce example built
# with mpicc.mpich) runs 3 hosts x 2 ranks on simulated hosts. The job asks for MPICH with the
# annotation trainlet.io/mpi-implementation; hydra reads its hostfile (host:N) and launcher
# (rsh, trainlet-exec) from the launcher's env and starts hydra_pmi_proxy on the other hosts
# through the trainlet agents. A sampler of this test's own processes checks that no ssh, sshd or
# rsh ever runs. Refusals as for OpenMPI: no job credentials, a host outside the placement.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/netns_lib.sh"
command -v mpirun.mpich >/dev/null || fail "mpirun.mpich not installed (apt-get install mpich)"
[ -x "$TRAINLET_BIN/mpi-allreduce-mpich" ] || fail "mpi-allreduce-mpich was not built (mpicc.mpich missing?)"

start_netns_cluster 3
log "cluster up in $NETNS_MODE mode"
# hydra calls its own host by the hostfile entry that is one of its addresses. A 127.0.0.x alias
# is not (lo holds only 127.0.0.1), so in loopback mode the launcher names it with -localhost;
# on real hosts and in namespaces the advertised address is an interface's.
localhost_args=()
[ "$NETNS_MODE" = loopback ] && localhost_args=(-localhost "${NETNS_HOSTS[0]}")

# mpich_job NAME COMMAND...: a 3 x 2 job on the mpi-distributed runtime, asking for MPICH.
mpich_job() {
  local name=$1; shift
  local file="$WORK/$name.yaml"
  {
    printf 'apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata:\n  name: %s\n' "$name"
    printf '  annotations:\n    trainlet.io/mpi-implementation: MPICH\n'
    printf 'spec:\n  runtimeRef:\n    name: mpi-distributed\n  trainer:\n    numNodes: 3\n    numProcPerNode: 2\n'
    printf '    command:\n      - mpirun.mpich\n'
    for a in "${localhost_args[@]}" -np 6 "$@"; do printf '      - "%s"\n' "$a"; done
  } > "$file"
  echo "$file"
}

# The own-process sampler: every 50 ms, any ssh, sshd or rsh this cluster started is a violation;
# it also notes which launch processes it saw, so the check cannot pass by sampling nothing.
( while :; do
    for name in ssh sshd rsh; do
      for p in $(own_pgrep -x "$name"); do
        echo "$name pid $p: $(tr '\0' ' ' < "/proc/$p/cmdline" 2>/dev/null)" >> "$WORK/ssh-seen"
      done
    done
    for name in hydra_pmi_proxy trainlet-exec; do
      [ -z "$(own_pgrep -x "$name")" ] || echo "$name" >> "$WORK/launch-seen"
    done
    sleep 0.05
  done ) &
SAMPLER=$!
EXTRA_PIDS+=("$SAMPLER")
check_no_ssh() {
  [ ! -s "$WORK/ssh-seen" ] || fail "an ssh/rsh process ran: $(head -3 "$WORK/ssh-seen")"
}

# 1. The C example built with mpicc.mpich: every rank sees the right sum, on all three hosts.
start_ns=$(date +%s%N)
"$CTL" apply -f "$(mpich_job allreduce "$TRAINLET_BIN/mpi-allreduce-mpich")" >/dev/null
"$CTL" wait trainjob/allreduce --for=condition=Complete --timeout=120s \
  || fail "allreduce did not complete: $("$CTL" describe trainjob allreduce) $("$CTL" logs allreduce)"
elapsed_ms=$(( ($(date +%s%N) - start_ns) / 1000000 ))
out=$("$CTL" logs allreduce)
[ "$(grep -c "allreduce sum 21 (expected 21) OK" <<<"$out")" = 6 ] \
  || fail "expected 6 MPICH ranks with sum 21, got: $out"
if [ "$NETNS_MODE" = netns ]; then
  for h in host1 host2 host3; do grep -q "on $h:" <<<"$out" || fail "no rank ran on $h: $out"; done
fi
d=$("$CTL" describe trainjob allreduce)
assert_contains "$d" "MPICH hydra proxies started through trainlet-exec, no SSH" "describe's launch line"
check_no_ssh
log "MPICH allreduce complete on 3 hosts x 2 ranks through hydra and trainlet-exec (apply to Complete: ${elapsed_ms} ms)"

# 1b. Launch time, mpirun.mpich next to OpenMPI's mpirun on the same hosts: the launcher's wall
# time for the 3 x 2 allreduce (start, MPI_Init, one allreduce, exit), as the job itself measures it.
timed_job() {  # timed_job NAME IMPLEMENTATION MPIRUN...: prints the launcher's wall time in ms
  local name=$1 impl=$2; shift 2
  {
    printf 'apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata:\n  name: %s\n' "$name"
    printf '  annotations:\n    trainlet.io/mpi-implementation: %s\n' "$impl"
    printf 'spec:\n  runtimeRef:\n    name: mpi-distributed\n  trainer:\n    numNodes: 3\n    numProcPerNode: 2\n'
    printf '    command: ["/bin/sh", "-c", "s=$(date +%%s%%N); %s >/dev/null; r=$?; echo launcher-ms $(( ($(date +%%s%%N) - s) / 1000000 )); exit $r"]\n' "$*"
  } > "$WORK/$name.yaml"
  "$CTL" apply -f "$WORK/$name.yaml" >/dev/null
  "$CTL" wait "trainjob/$name" --for=condition=Complete --timeout=120s >/dev/null \
    || fail "$name did not complete: $("$CTL" logs "$name")"
  "$CTL" logs "$name" | sed -n 's/.*launcher-ms \([0-9]*\).*/\1/p'
}
mpich_ms=""; ompi_ms=""
for i in 1 2 3; do
  mpich_ms+="$(timed_job "mpich-time-$i" MPICH mpirun.mpich "${localhost_args[*]}" -np 6 "$TRAINLET_BIN/mpi-allreduce-mpich") "
  if [ "$NETNS_MODE" = netns ] && [ -x "$TRAINLET_BIN/mpi-allreduce" ]; then
    ompi_ms+="$(timed_job "ompi-time-$i" OpenMPI mpirun --allow-run-as-root -np 6 "$TRAINLET_BIN/mpi-allreduce") "
  fi
done
log "launcher wall time, 3 x 2 allreduce through trainlet-exec: MPICH (hydra) ${mpich_ms}ms; OpenMPI ${ompi_ms:-(not run) }ms"
check_no_ssh

# 2. A job that stays up, to look at its launch tree: hydra's proxies on the other two hosts were
# started by trainlet-exec, with hydra's rsh command line, under the agents of those hosts.
"$CTL" apply -f "$(mpich_job sleeper sleep 300)" >/dev/null
wait_for 60 sh -c "'$CTL' get trainjobs sleeper | grep -q Running" || fail "sleeper never Running"
three_proxies() { [ "$(own_pgrep -x hydra_pmi_proxy | wc -l)" -ge 3 ]; }
wait_for 30 three_proxies || fail "hydra proxies did not start: $(own_pgrep -x hydra_pmi_proxy)"
# hydra forks the proxy of its own host; in loopback mode none is its own (see -localhost above).
want_execs=2
[ "$NETNS_MODE" = loopback ] && want_execs=3
execs=$(own_pgrep -x trainlet-exec)
[ "$(wc -w <<<"$execs")" = "$want_execs" ] || fail "want $want_execs trainlet-exec, one per host hydra does not fork on, got: $execs"
for pid in $execs; do
  args=$(tr '\0' ' ' < "/proc/$pid/cmdline")
  grep -qE "trainlet-exec ${NETNS_SUBNET//./\\.}\.[0-9]+ \"[^\"]*/hydra_pmi_proxy\" --control-port " <<<"$args" \
    || fail "trainlet-exec $pid was not run with hydra's rsh argv: $args"
done
node_ranks=$(for pid in $(own_pgrep -x hydra_pmi_proxy); do
  tr '\0' '\n' < "/proc/$pid/environ" | sed -n 's/^TRAINLET_NODE_RANK=//p'
done | sort -u | tr '\n' ' ')
[ "$node_ranks" = "0 1 2 " ] || fail "hydra proxies should run on node ranks 0 1 2, got: $node_ranks"
sleeps=$(job_pids sleeper | while read -r p; do [ "$(cat "/proc/$p/comm" 2>/dev/null)" = sleep ] && echo "$p"; done | wc -l)
[ "$sleeps" = 6 ] || fail "want 6 ranks of sleeper, got $sleeps"
check_no_ssh
log "hydra started its proxies on the other hosts through trainlet-exec ($want_execs); 6 ranks run"

# 3. Refusals. hydra run by hand, outside any job, with trainlet-exec as its launcher: without
# the job's credentials nothing starts; with the sleeper's credentials, a host outside its
# placement is refused. trainlet-exec says why at once and exits 255, as a failed ssh does; hydra
# then waits for a proxy that never comes (it does the same when ssh fails), so it is stopped:
# once its output has the refusal (hydra starts the one proxy through that one trainlet-exec,
# so nothing else can start the command), or after 10 s.
marker="$WORK/must-not-exist"
hydra_env=(HYDRA_LAUNCHER=rsh "HYDRA_LAUNCHER_EXEC=$TRAINLET_BIN/trainlet-exec")
printf '%s:1\n' "${NETNS_HOSTS[1]}" > "$WORK/placed.hosts"
# refused_hydra WHY ENV...: `mpirun.mpich -np 1 touch $marker` with ENV, its output in $WORK/out;
# its exit status, 124 (as timeout's) when it was stopped.
refused_hydra() {
  local why=$1 pid rc=0; shift
  env "$@" timeout 10 mpirun.mpich -np 1 touch "$marker" > "$WORK/out" 2>&1 &
  pid=$!
  said_or_ended() { grep -qF "$why" "$WORK/out" || ! kill -0 "$pid" 2>/dev/null; }
  wait_for 10 said_or_ended || true
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid"
    wait "$pid" 2>/dev/null || true
    return 124
  fi
  wait "$pid" || rc=$?
  return "$rc"
}
if refused_hydra "no job credentials" -u TRAINLET_EXEC_KEY "${hydra_env[@]}" \
    HYDRA_HOST_FILE="$WORK/placed.hosts"; then
  fail "hydra started a command through trainlet-exec without credentials"
fi
assert_contains "$(cat "$WORK/out")" "no job credentials" "no-credentials refusal"
launcher=$(own_pgrep -f "^mpirun.mpich .*-np 6 sleep 300" | head -1)
[ -n "$launcher" ] || fail "the sleeper's mpirun.mpich not found"
creds=$(tr '\0' '\n' < "/proc/$launcher/environ" | grep '^TRAINLET_EXEC_' | tr '\n' ' ')
printf '10.255.255.1:1\n' > "$WORK/outside.hosts"
# shellcheck disable=SC2086  # creds: NAME=VALUE words
if refused_hydra "not in the placement" $creds "${hydra_env[@]}" \
    HYDRA_HOST_FILE="$WORK/outside.hosts"; then
  fail "hydra started a command on a host outside the placement"
fi
assert_contains "$(cat "$WORK/out")" "not in the placement" "outside-placement refusal"
[ ! -e "$marker" ] || fail "a refused launch started its command"
log "refusals ok: no credentials, a host outside the placement"

# 4. Deleting the job leaves no proxy and no rank on any host.
"$CTL" delete trainjob sleeper --timeout 60s >/dev/null
no_sleeper_pids() { [ -z "$(job_pids sleeper)" ]; }
wait_for 15 no_sleeper_pids || fail "processes of the deleted MPICH job remain: $(job_pids sleeper | tr '\n' ' ')"
[ -z "$(own_pgrep -x hydra_pmi_proxy)" ] || fail "hydra_pmi_proxy still running: $(own_pgrep -x hydra_pmi_proxy)"

kill "$SAMPLER" 2>/dev/null || true
wait "$SAMPLER" 2>/dev/null || true
check_no_ssh
grep -qx hydra_pmi_proxy "$WORK/launch-seen" && grep -qx trainlet-exec "$WORK/launch-seen" \
  || fail "the sampler never saw hydra_pmi_proxy and trainlet-exec: it sampled nothing"
log "delete left no proxy or rank; no ssh, sshd or rsh ran at any point"
echo "PASS mpich_test ($NETNS_MODE mode)"
