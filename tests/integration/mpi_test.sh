#!/usr/bin/env bash
# MPI without SSH: real OpenMPI 4.1 jobs across simulated hosts (network + UTS namespaces, or
# 127.0.0.x aliases where namespaces are not allowed), started by mpirun through trainlet-exec.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/netns_lib.sh"
command -v mpirun >/dev/null || fail "mpirun not installed (apt-get install openmpi-bin)"
[ -x "$TRAINLET_BIN/mpi-allreduce" ] || fail "mpi-allreduce was not built (libopenmpi-dev missing?)"

start_netns_cluster 3
log "cluster up in $NETNS_MODE mode"

# The mpi runtime keeps OpenMPI's TCP on the agents' network (docs/runtimes.md, "mpi"): the
# smallest network that holds every advertised address (.2-.4: a /29), the whole loopback network
# for 127.0.0.x hosts. The jobs below set no if_include of their own. In namespace mode host1, the launcher's host, also gets an
# unrelated interface, as a real node has docker or VPN bridges that come and go: mpirun must
# not offer it to its daemons.
if [ "$NETNS_MODE" = netns ]; then
  tcp_networks="$NETNS_SUBNET.0/29"
  unrelated="${NETNS_SUBNET%.*}.78.1"
  ip -n "${NETNS_NAMES[0]}" link add unrelated0 type bridge
  ip -n "${NETNS_NAMES[0]}" addr add "$unrelated/24" dev unrelated0
  ip -n "${NETNS_NAMES[0]}" link set unrelated0 up  # a bridge without ports: up, no carrier
else
  tcp_networks="127.0.0.0/8"
fi

# mpi_job NAME EXTRA_ENV_YAML COMMAND...: a 3 x 2 job on the mpi-distributed runtime
mpi_job() {
  local name=$1 extra_env=$2; shift 2
  local file="$WORK/$name.yaml"
  {
    printf 'apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata:\n  name: %s\n' "$name"
    printf 'spec:\n  runtimeRef:\n    name: mpi-distributed\n  trainer:\n    numNodes: 3\n    numProcPerNode: 2\n'
    [ "$NETNS_MODE" = loopback ] && extra_env=$(printf '      - {name: OMPI_MCA_btl, value: "self,tcp"}\n%s' "$extra_env")
    [ -n "$extra_env" ] && printf '    env:\n%s\n' "$extra_env"
    printf '    command:\n      - mpirun\n      - --allow-run-as-root\n      - -np\n      - "6"\n'
    for a in "$@"; do printf '      - "%s"\n' "$a"; done
  } > "$file"
  echo "$file"
}

check_allreduce_output() {  # check_allreduce_output JOB
  local out ok
  out=$("$CTL" logs "$1")
  ok=$(grep -c "allreduce sum 21 (expected 21) OK" <<<"$out" || true)
  [ "$ok" = 6 ] || fail "$1: expected 6 ranks with sum 21, got: $out"
  if [ "$NETNS_MODE" = netns ]; then
    for h in host1 host2 host3; do grep -q "on $h:" <<<"$out" || fail "$1: no rank ran on $h: $out"; done
  fi
}

# 1. The C example: 3 hosts x 2 ranks, MPI_Allreduce + MPI_Barrier, every rank right.
"$CTL" apply -f "$(mpi_job allreduce "" "$TRAINLET_BIN/mpi-allreduce")" >/dev/null
"$CTL" wait trainjob/allreduce --for=condition=Complete --timeout=120s || fail "allreduce did not complete: $("$CTL" describe trainjob allreduce)"
check_allreduce_output allreduce
"$CTL" describe trainjob allreduce | grep -q "through trainlet-exec" || fail "describe must say how it launched"
log "C allreduce complete on 3 hosts"

# 1b. No host reports an RDMA device, so the launcher gets OMPI_MCA_pml=ob1 (docs/runtimes.md,
# "mpi"), and mpirun hands it to every rank on every host; a trainer env entry overrides it.
"$CTL" apply -f "$(mpi_job pmlenv "" /bin/sh -c 'echo pml=$OMPI_MCA_pml on $(hostname) tcp=$OMPI_MCA_btl_tcp_if_include+$OMPI_MCA_oob_tcp_if_include')" >/dev/null
"$CTL" wait trainjob/pmlenv --for=condition=Complete --timeout=120s >/dev/null || fail "pmlenv: $("$CTL" logs pmlenv)"
out=$("$CTL" logs pmlenv)
[ "$(grep -c "pml=ob1 on " <<<"$out")" = 6 ] || fail "every rank should see OMPI_MCA_pml=ob1: $out"
if [ "$NETNS_MODE" = netns ]; then
  for h in host2 host3; do grep -q "pml=ob1 on $h" <<<"$out" || fail "no ob1 rank on $h: $out"; done
fi
"$CTL" apply -f "$(mpi_job pmlown '      - {name: OMPI_MCA_pml, value: "^cm"}' /bin/sh -c 'echo pml=$OMPI_MCA_pml')" >/dev/null
"$CTL" wait trainjob/pmlown --for=condition=Complete --timeout=120s >/dev/null || fail "pmlown: $("$CTL" logs pmlown)"
[ "$("$CTL" logs pmlown | grep -c 'pml=^cm')" = 6 ] || fail "the trainer's OMPI_MCA_pml must win: $("$CTL" logs pmlown)"
log "TCP-only placement: every rank runs with OMPI_MCA_pml=ob1 unless the trainer env says otherwise"
# The same way every rank gets the TCP narrowing, on every host.
[ "$(grep -cF "tcp=$tcp_networks+$tcp_networks" <<<"$out")" = 6 ] || fail "every rank should see if_include $tcp_networks: $out"
"$CTL" apply -f "$(mpi_job tcpown '      - {name: OMPI_MCA_btl_tcp_if_exclude, value: "127.0.0.1/8,sppp"}' /bin/sh -c 'echo tcp=$OMPI_MCA_btl_tcp_if_include+$OMPI_MCA_oob_tcp_if_include')" >/dev/null
"$CTL" wait trainjob/tcpown --for=condition=Complete --timeout=120s >/dev/null || fail "tcpown: $("$CTL" logs tcpown)"
[ "$("$CTL" logs tcpown | grep -cF "tcp=+$tcp_networks")" = 6 ] || fail "a trainer exclude must leave out that include only: $("$CTL" logs tcpown)"
log "every rank runs with btl/oob_tcp_if_include $tcp_networks; a trainer exclude leaves that one out"

# 2. The same with mpi4py under Debian's /usr/bin/python3.
if /usr/bin/python3 -c 'import mpi4py' 2>/dev/null; then
  "$CTL" apply -f "$(mpi_job pyallreduce "" /usr/bin/python3 "$TRAINLET_SOURCE_DIR/examples/mpi-allreduce/allreduce.py")" >/dev/null
  "$CTL" wait trainjob/pyallreduce --for=condition=Complete --timeout=120s || fail "mpi4py job: $("$CTL" logs pyallreduce)"
  check_allreduce_output pyallreduce
  log "mpi4py allreduce complete"
else
  fail "python3-mpi4py is not installed"
fi

# 3. One rank exiting non-zero fails the job, with its code in describe.
"$CTL" apply -f "$(mpi_job failing '      - {name: TRAINLET_FAIL_RANK, value: "4"}' "$TRAINLET_BIN/mpi-allreduce")" >/dev/null
"$CTL" wait trainjob/failing --for=condition=Failed --timeout=120s >/dev/null || fail "failing job not Failed"
d=$("$CTL" describe trainjob failing)
grep -Eq "^  0 +node-1 +0 +Failed +[0-9]+ +3 " <<<"$d" || fail "exit code 3 not in describe: $d"
assert_contains "$d" "exited with code 3" "attempt cause"
log "failing rank -> Failed with code 3"

# 4. trainlet-exec refusals: nothing is started for a caller without the job's credentials.
marker="$WORK/must-not-exist"
if env -u TRAINLET_EXEC_KEY "$TRAINLET_BIN/trainlet-exec" "${NETNS_HOSTS[1]}" touch "$marker" 2> "$WORK/err"; then
  fail "trainlet-exec ran without credentials"
fi
assert_contains "$(cat "$WORK/err")" "no job credentials" "no-credentials refusal"
"$CTL" apply -f "$(mpi_job sleeper "" sleep 300)" >/dev/null
wait_for 60 sh -c "'$CTL' get trainjobs sleeper | grep -q Running" || fail "sleeper never Running"
two_orteds() { [ "$(own_pgrep -x orted | wc -l)" -ge 2 ]; }
wait_for 30 two_orteds || fail "no orted started for sleeper"
launcher=$(own_pgrep -f -x "mpirun --allow-run-as-root -np 6 sleep 300" | head -1)
[ -n "$launcher" ] || fail "launcher mpirun not found"
# mpirun handed the narrowing to its daemons, and offered them only host1's advertised address to
# call back on, not the unrelated interface.
for pid in $(own_pgrep -x orted); do
  args=$(tr '\0' ' ' < "/proc/$pid/cmdline")
  for param in oob_tcp_if_include btl_tcp_if_include; do
    grep -qF -- "-mca $param $tcp_networks " <<<"$args" || fail "orted $pid was not given $param: $args"
  done
  if [ "$NETNS_MODE" = netns ]; then
    uri=$(grep -o 'orte_hnp_uri [^ ]*' <<<"$args")
    grep -qF "tcp://${NETNS_HOSTS[0]}:" <<<"$uri" || fail "orted $pid: mpirun's uri lacks ${NETNS_HOSTS[0]}: $uri"
    if grep -qF "$unrelated" <<<"$uri"; then fail "orted $pid: mpirun offered the unrelated interface: $uri"; fi
  fi
done
log "the remote daemons run with the narrowing$([ "$NETNS_MODE" = netns ] && echo "; mpirun offered them only ${NETNS_HOSTS[0]}")"
creds=$(tr '\0' '\n' < "/proc/$launcher/environ" | grep '^TRAINLET_EXEC_' | tr '\n' ' ')
# A host outside the placement, with the job's real credentials.
if env $creds "$TRAINLET_BIN/trainlet-exec" 10.255.255.1 touch "$marker" 2> "$WORK/err"; then
  fail "trainlet-exec started a command on a host outside the placement"
fi
assert_contains "$(cat "$WORK/err")" "not in the placement" "outside-placement refusal"
# A forged key: any key pair that is not this attempt's launcher key.
"$CTL" keys create --role operator --name forged --dir "$WORK/forged" >/dev/null
forged_pub=$(sed -n 's/^public-key = "\(.*\)"/\1/p' "$WORK/forged/forged.key")
forged_sec=$(sed -n 's/^secret-key = "\(.*\)"/\1/p' "$WORK/forged/forged.key")
if env $creds TRAINLET_EXEC_PUBLIC_KEY="$forged_pub" TRAINLET_EXEC_KEY="$forged_sec" \
    timeout 30 "$TRAINLET_BIN/trainlet-exec" "${NETNS_HOSTS[1]}" touch "$marker" 2> "$WORK/err"; then
  fail "trainlet-exec with a forged key was accepted"
fi
assert_contains "$(cat "$WORK/err")" "refused" "forged-key refusal"
[ ! -e "$marker" ] || fail "a refused trainlet-exec started its command"
log "trainlet-exec refusals ok"

# trainlet-exec relays output and exit status, and its remote command dies with it.
out=$(env $creds "$TRAINLET_BIN/trainlet-exec" "${NETNS_HOSTS[2]}" 'echo out-$TRAINLET_NODE; echo err >&2; exit 7' 2> "$WORK/err") && rc=0 || rc=$?
[ "$rc" = 7 ] || fail "trainlet-exec exit status: $rc (want 7): $(cat "$WORK/err")"
[ "$out" = "out-node-3" ] || fail "trainlet-exec stdout: $out"
[ "$(cat "$WORK/err")" = "err" ] || fail "trainlet-exec stderr: $(cat "$WORK/err")"
has_remote_sleeper() { [ -n "$(own_pgrep -f -x "sleep 4242")" ]; }
for how in TERM KILL; do
  env $creds "$TRAINLET_BIN/trainlet-exec" "${NETNS_HOSTS[2]}" sleep 4242 &
  exec_pid=$!
  wait_for 10 has_remote_sleeper || fail "remote sleep did not start"
  kill -"$how" "$exec_pid"; wait "$exec_pid" 2>/dev/null || true
  wait_for 15 eval '! has_remote_sleeper' || fail "remote command survived a SIG$how'd trainlet-exec"
done
log "trainlet-exec relays output and status; its command dies with it (TERM and KILL)"

# 5. Deleting a running MPI job leaves no orted and no rank alive on any host.
[ -n "$(job_pids sleeper)" ] || fail "no processes of the sleeper found"
"$CTL" delete trainjob sleeper --timeout 60s >/dev/null
no_sleeper_pids() { [ -z "$(job_pids sleeper)" ]; }
wait_for 15 no_sleeper_pids || fail "processes of the deleted MPI job remain: $(ps -o pid,args -p "$(job_pids sleeper | tr '\n' ',' | sed 's/,$//')")"
[ -z "$(live_orted)" ] || fail "orted still running: $(live_orted)"
# The old launcher key died with its attempt.
if env $creds timeout 30 "$TRAINLET_BIN/trainlet-exec" "${NETNS_HOSTS[1]}" touch "$marker" 2>/dev/null; then
  fail "the key of a deleted job still starts commands"
fi
[ ! -e "$marker" ] || fail "a stale key started a command"
log "delete left no orted or rank"
echo "PASS mpi_test ($NETNS_MODE mode)"
