#!/usr/bin/env bash
# MPI by direct launch (docs/runtimes.md, "mpi", direct launch): real OpenMPI 4.1 ranks started by
# trainlet itself, each node's MPI_Init served by trainlet-pmix; no mpirun, orted or trainlet-exec
# runs at any moment (an own-process sampler checks every 50 ms). Then the failures: MPI_Abort by
# a rank, and a rank killed inside MPI_Init, each fail the attempt promptly and leave nothing.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/netns_lib.sh"
[ -x "$TRAINLET_BIN/mpi-allreduce" ] || fail "mpi-allreduce was not built (libopenmpi-dev missing?)"
if [ ! -x "$TRAINLET_BIN/trainlet-pmix" ]; then
  echo "SKIP: trainlet-pmix was not built (libpmix-dev missing)"
  exit 77
fi

start_netns_cluster 3
log "cluster up in $NETNS_MODE mode"

# The sampler: every 50 ms, any mpirun, orted or trainlet-exec this cluster started is a violation.
( while :; do
    for p in $(own_pgrep -x mpirun) $(own_pgrep -x orted) $(own_pgrep -x orterun) $(own_pgrep -x trainlet-exec); do
      echo "$(date +%s%N) $p $({ tr '\0' ' ' < "/proc/$p/cmdline"; } 2>/dev/null)" >> "$WORK/launchers"
    done
    sleep 0.05
  done ) &
LAUNCHER_SAMPLER=$!
EXTRA_PIDS+=("$LAUNCHER_SAMPLER")

# direct_job NAME NODES RUNTIME EXTRA_ENV_YAML COMMAND...: NODES x 2 ranks of COMMAND itself.
direct_job() {
  local name=$1 nodes=$2 runtime=$3 extra_env=$4; shift 4
  local file="$WORK/$name.yaml"
  {
    printf 'apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata:\n  name: %s\n' "$name"
    [ "$runtime" = mpi-distributed ] && printf '  annotations:\n    trainlet.io/mpi-launch: direct\n'
    printf 'spec:\n  runtimeRef:\n    name: %s\n  trainer:\n    numNodes: %s\n    numProcPerNode: 2\n' "$runtime" "$nodes"
    [ "$NETNS_MODE" = loopback ] && extra_env=$(printf '      - {name: OMPI_MCA_btl, value: "self,tcp"}\n%s' "$extra_env")
    [ -n "$extra_env" ] && printf '    env:\n%s\n' "$extra_env"
    printf '    command:\n'
    for a in "$@"; do printf '      - "%s"\n' "$a"; done
  } > "$file"
  echo "$file"
}

check_sum() {  # check_sum JOB RANKS
  local out ok want=$(( $2 * ($2 + 1) / 2 ))
  out=$("$CTL" logs "$1")
  ok=$(grep -c "allreduce sum $want (expected $want) OK" <<<"$out" || true)
  [ "$ok" = "$2" ] || fail "$1: expected $2 ranks with sum $want, got: $out"
}

no_process_left() {  # no_process_left JOB
  [ -z "$(job_pids "$1")" ] && [ -z "$(own_pgrep -x trainlet-pmix)" ]
}

# 1. One node, two ranks: the allreduce example, by annotation on mpi-distributed. libpmix's hwloc
# verbosity (the job's env is trainlet-pmix's, its stderr rank 0's log) shows that the server
# took the agent's topology (common/pmix/node_topology_xml.h) instead of discovering the node.
"$CTL" apply -f "$(direct_job single 1 mpi-distributed '      - {name: PMIX_MCA_pmix_hwloc_verbose, value: "2"}' "$TRAINLET_BIN/mpi-allreduce")" >/dev/null
"$CTL" wait trainjob/single --for=condition=Complete --timeout=60s || fail "single did not complete: $("$CTL" describe trainjob single) $("$CTL" logs single)"
check_sum single 2
"$CTL" describe trainjob single | grep -q "ranks started directly, PMIx" || fail "describe must say how it launched: $("$CTL" describe trainjob single)"
r0=$("$CTL" logs single --rank 0)
grep -q "pmix_hwloc_setup_topology topology externally provided" <<<"$r0" && ! grep -q "doing discovery" <<<"$r0" \
  || fail "single: trainlet-pmix should take the agent's topology, not discover the node: $r0"
log "1 x 2 direct launch: both ranks see the right sum, the server took the agent's topology"

# 2. Three hosts x two ranks on the shipped mpi-direct runtime, with btl verbose (from the trainer
# env, as any OMPI_MCA_*) to show vader (shared memory) inside a host and tcp between hosts.
"$CTL" apply -f "$(direct_job three 3 mpi-direct '      - {name: OMPI_MCA_btl_base_verbose, value: "100"}' "$TRAINLET_BIN/mpi-allreduce")" >/dev/null
"$CTL" wait trainjob/three --for=condition=Complete --timeout=90s || fail "three did not complete: $("$CTL" describe trainjob three) $("$CTL" logs three)"
check_sum three 6
if [ "$NETNS_MODE" = netns ]; then
  out=$("$CTL" logs three)
  for h in host1 host2 host3; do grep -q "on $h:" <<<"$out" || fail "three: no rank ran on $h: $out"; done
  # Rank 0's peer on its own host goes over shared memory, the others over TCP.
  r0=$("$CTL" logs three --rank 0)
  grep -qE "Using vader btl for send to \[\[[0-9]+,[0-9]+\],1\]" <<<"$r0" || fail "three: rank 0 should reach rank 1 by vader: $r0"
  for r in 2 3 4 5; do
    grep -qE "Using tcp btl for send to \[\[[0-9]+,[0-9]+\],$r\]" <<<"$r0" || fail "three: rank 0 should reach rank $r by tcp: $r0"
  done
  log "3 x 2: vader between ranks of a host, tcp between hosts"
fi
log "3 x 2 direct launch: every rank sees the right sum"

# 3. mpi4py, 3 x 2.
if /usr/bin/python3 -c 'import mpi4py' 2>/dev/null; then
  "$CTL" apply -f "$(direct_job py 3 mpi-direct "" /usr/bin/python3 "$TRAINLET_SOURCE_DIR/examples/mpi-allreduce/allreduce.py")" >/dev/null
  "$CTL" wait trainjob/py --for=condition=Complete --timeout=90s || fail "py did not complete: $("$CTL" logs py)"
  check_sum py 6
  log "mpi4py 3 x 2 direct launch: every rank sees the right sum"
else
  log "python3-mpi4py not installed: mpi4py part skipped"
fi

# 4. MPI_Abort by rank 4: the attempt fails promptly, the cause names MPI_Abort, the rank and its
# errorcode (trainlet-pmix told the agent before letting the rank go), trainlet-pmix's line names
# MPI_Abort, and nothing of the job is left.
start=$(date +%s)
"$CTL" apply -f "$(direct_job abort 3 mpi-direct '      - {name: TRAINLET_FAIL_RANK, value: "4"}' "$TRAINLET_BIN/mpi-allreduce")" >/dev/null
"$CTL" wait trainjob/abort --for=condition=Failed --timeout=60s || fail "abort did not fail: $("$CTL" describe trainjob abort)"
took=$(( $(date +%s) - start ))
[ "$took" -le 30 ] || fail "MPI_Abort took $took s to fail the attempt"
desc=$("$CTL" describe trainjob abort)
grep -qE "rank 4 on node-[0-9]+ called MPI_Abort \(errorcode 3\)" <<<"$desc" || fail "abort: cause should name rank 4's MPI_Abort and errorcode: $desc"
[ "$(grep -cE "rank 4 on node-[0-9]+ called MPI_Abort \(errorcode 3\)" <<<"$desc")" -ge 2 ] || fail "abort: the attempt's cause and its event should both name MPI_Abort: $desc"
"$CTL" logs abort | grep -q "rank 4 called PMIx_Abort (MPI_Abort) with status 3" || fail "abort: trainlet-pmix should name MPI_Abort: $("$CTL" logs abort)"
wait_for 15 no_process_left abort || fail "abort left processes: $(job_pids abort) $(own_pgrep -x trainlet-pmix)"
log "MPI_Abort fails the attempt in ${took}s, cause named, nothing left"

# 5. A rank killed inside MPI_Init: rank 0 holds MPI_Init's fence back (it sleeps first), rank 3
# enters MPI_Init, waits in that fence and is killed there (SIGKILL 1 s after it started).
cat > "$WORK/initkill.sh" <<SCRIPT
#!/bin/sh
case "\$TRAINLET_RANK" in
  0) sleep 20 ;;
  3) (sleep 1; kill -9 \$\$) & ;;
esac
exec "$TRAINLET_BIN/mpi-allreduce"
SCRIPT
chmod +x "$WORK/initkill.sh"
start=$(date +%s)
"$CTL" apply -f "$(direct_job initkill 3 mpi-direct "" "$WORK/initkill.sh")" >/dev/null
"$CTL" wait trainjob/initkill --for=condition=Failed --timeout=60s || fail "initkill did not fail: $("$CTL" describe trainjob initkill) $("$CTL" logs initkill)"
took=$(( $(date +%s) - start ))
[ "$took" -le 15 ] || fail "a rank killed in MPI_Init took $took s to fail the attempt"
desc=$("$CTL" describe trainjob initkill)
grep -qE "rank 3 on node-[0-9]+ was killed by signal 9" <<<"$desc" || fail "initkill: cause should name rank 3's kill: $desc"
wait_for 15 no_process_left initkill || fail "initkill left processes: $(job_pids initkill)"
log "a rank killed in MPI_Init fails the attempt in ${took}s, cause named, nothing left"

# 6. A rank killed between two fences: after MPI_Init (the first) and before MPI_Finalize (the
# last), rank 3 kills itself while the others wait for it in a barrier.
cat > "$WORK/between.py" <<'PY'
import os, signal, time
from mpi4py import MPI
comm = MPI.COMM_WORLD
if comm.Get_rank() == 3:
    time.sleep(0.5)
    os.kill(os.getpid(), signal.SIGKILL)
comm.Barrier()
PY
if /usr/bin/python3 -c 'import mpi4py' 2>/dev/null; then
  start=$(date +%s)
  "$CTL" apply -f "$(direct_job between 3 mpi-direct "" /usr/bin/python3 "$WORK/between.py")" >/dev/null
  "$CTL" wait trainjob/between --for=condition=Failed --timeout=60s || fail "between did not fail: $("$CTL" describe trainjob between)"
  took=$(( $(date +%s) - start ))
  [ "$took" -le 15 ] || fail "a rank killed between fences took $took s to fail the attempt"
  grep -qE "rank 3 on node-[0-9]+ was killed by signal 9" <<<"$("$CTL" describe trainjob between)" || fail "between: cause should name rank 3"
  wait_for 15 no_process_left between || fail "between left processes: $(job_pids between)"
  log "a rank killed between two fences fails the attempt in ${took}s, cause named, nothing left"
fi

# 6b. MPI_Abort with status 0: the rank's own exit (0) is a failure because it aborted (the cause
# names it), and trainlet-pmix exits so that its step stops the node's ranks; the attempt fails
# promptly and nothing is left.
if /usr/bin/python3 -c 'import mpi4py' 2>/dev/null; then
  printf 'from mpi4py import MPI\nimport time\nif MPI.COMM_WORLD.Get_rank() == 1:\n    MPI.COMM_WORLD.Abort(0)\ntime.sleep(60)\n' > "$WORK/abort0.py"
  start=$(date +%s)
  "$CTL" apply -f "$(direct_job abortzero 3 mpi-direct "" /usr/bin/python3 "$WORK/abort0.py")" >/dev/null
  "$CTL" wait trainjob/abortzero --for=condition=Failed --timeout=60s || fail "abortzero did not fail: $("$CTL" describe trainjob abortzero)"
  took=$(( $(date +%s) - start ))
  [ "$took" -le 15 ] || fail "MPI_Abort(0) took $took s to fail the attempt"
  "$CTL" logs abortzero | grep -q "rank 1 called PMIx_Abort (MPI_Abort) with status 0" || fail "abortzero: trainlet-pmix should name the abort: $("$CTL" logs abortzero)"
  grep -qE "rank 1 on node-[0-9]+ called MPI_Abort \(errorcode 0\)" <<<"$("$CTL" describe trainjob abortzero)" || fail "abortzero: cause should name rank 1's MPI_Abort: $("$CTL" describe trainjob abortzero)"
  wait_for 15 no_process_left abortzero || fail "abortzero left processes: $(job_pids abortzero)"
  log "MPI_Abort with status 0 fails the attempt in ${took}s, nothing left"
fi

# 6c. MPI_Publish_name on rank 0, MPI_Lookup_name on every rank after a barrier (no PMIx fence
# in between): PMIx_Publish/Lookup ride the rendezvous store's publish, so every node sees the
# name at once. The job is on mpi-distributed with no trainlet.io/mpi-launch: a command that
# starts no launcher is launched directly by default, and describe says so.
mpicc_openmpi=$(command -v mpicc.openmpi || command -v mpicc || true)
if [ -n "$mpicc_openmpi" ]; then
  "$mpicc_openmpi" -O2 -o "$WORK/mpi-publish" "$TRAINLET_SOURCE_DIR/tests/integration/workers/mpi_publish_lookup.c" || fail "mpicc could not build mpi_publish_lookup.c"
  sed '/trainlet.io\/mpi-launch/d; /^  annotations:$/d' "$(direct_job publish 3 mpi-distributed "" "$WORK/mpi-publish")" > "$WORK/publish-default.yaml"
  grep -q "mpi-launch" "$WORK/publish-default.yaml" && fail "publish: the job must not ask for direct launch"
  "$CTL" apply -f "$WORK/publish-default.yaml" >/dev/null
  "$CTL" wait trainjob/publish --for=condition=Complete --timeout=60s || fail "publish did not complete: $("$CTL" describe trainjob publish) $("$CTL" logs publish)"
  [ "$("$CTL" logs publish | grep -c 'lookup trainlet-test-service -> trainlet-port-of-rank-0 OK')" = 6 ] || fail "publish: every rank should find rank 0's name: $("$CTL" logs publish)"
  desc=$("$CTL" describe trainjob publish)
  grep -q "ranks started directly, PMIx" <<<"$desc" || fail "publish: a plain command on mpi-distributed should be launched directly: $desc"
  grep -q "the command starts no launcher" <<<"$desc" || fail "publish: describe should say why direct launch was chosen: $desc"
  log "MPI_Publish_name/MPI_Lookup_name across 3 nodes without a fence; direct launch by default for a plain command"
else
  log "no mpicc: publish/lookup part skipped"
fi

# 7. The agent of node-2 is killed (-9) while the ranks run between MPI_Init and MPI_Finalize, and
# started again on its state dir. The ranks and trainlet-pmix live on under their step; the new
# agent adopts the step and serves the attempt's rendezvous again with the ranks' token, so the
# fence of MPI_Finalize (after the restart, on every node) completes and the job succeeds.
agent_ep=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["agent_endpoint"])' "$TRAINLET_HOME/endpoints.json")
restart_agent() {  # restart_agent INDEX: as start_netns_cluster started it
  local i=$1 keys="$TRAINLET_HOME/keys"
  netns_host_cmd "$i" "host$i"
  "${NETNS_CMD[@]}" "$TRAINLET_BIN/trainlet-agent" --name "node-$i" \
    --address "${NETNS_HOSTS[$((i - 1))]}" --coordinator "$agent_ep" \
    --coordinator-key "$keys/coordinator.key.pub" --key "$keys/node-$i.key" \
    --state-dir "$TRAINLET_HOME/agents/node-$i" --slots 4 --heartbeat-ms 200 --metrics-address "" \
    >> "$TRAINLET_HOME/logs/node-$i.log" 2>&1 &
  EXTRA_PIDS+=($!)
}
if /usr/bin/python3 -c 'import mpi4py' 2>/dev/null; then
  cat > "$WORK/slow.py" <<'PY'
import os, socket, sys, time
from mpi4py import MPI
comm = MPI.COMM_WORLD
while not os.path.exists(sys.argv[1]):  # the test's go, once the agent has restarted
    time.sleep(0.1)
total = comm.allreduce(comm.Get_rank() + 1)
print(f"rank {comm.Get_rank()} on {socket.gethostname()}: slow sum {total}", flush=True)
PY
  "$CTL" apply -f "$(direct_job agentkill 3 mpi-direct "" /usr/bin/python3 "$WORK/slow.py" "$WORK/slow-go")" >/dev/null
  wait_for 20 sh -c "[ \$('$CTL' describe trainjob agentkill | grep -c ' Running ') -ge 6 ]" || fail "agentkill never Running: $("$CTL" describe trainjob agentkill)"
  sleep 1  # past MPI_Init's fences
  # Ranks are bound as any trainlet rank: each runs on the CPUs describe reports for it.
  bound=0
  while read -r pid cpus; do
    [ "$(awk '/^Cpus_allowed_list/ {print $2}' "/proc/$pid/status")" = "$cpus" ] || fail "agentkill: pid $pid should run on CPUs $cpus: $(grep Cpus_allowed_list "/proc/$pid/status")"
    bound=$((bound + 1))
  done < <("$CTL" describe trainjob agentkill | awk '/^Ranks/ {t = 1; next} /^[A-Z]/ {t = 0} t && $4 == "Running" && $9 != "-" {print $5, $9}')
  [ "$bound" = 6 ] || fail "agentkill: expected 6 bound ranks, saw $bound: $("$CTL" describe trainjob agentkill)"
  log "every rank runs on the CPUs trainlet bound it to"
  node2_pids=$(for p in $(job_pids agentkill); do if grep -q "/agents/node-2/" "/proc/$p/environ" 2>/dev/null; then echo "$p"; fi; done | sort)
  [ -n "$node2_pids" ] || fail "agentkill: no process of node-2 found"
  agent2=${EXTRA_PIDS[2]}
  [ "$(cat "/proc/$agent2/comm")" = trainlet-agent ] || fail "EXTRA_PIDS[2] is not node-2's agent"
  disown "$agent2" 2>/dev/null || true  # no "Killed" line from this shell
  kill -9 "$agent2"
  wait_for 5 sh -c "! kill -0 $agent2 2>/dev/null" || fail "node-2's agent did not die"
  for p in $node2_pids; do kill -0 "$p" 2>/dev/null || fail "agentkill: pid $p of node-2 died with its agent"; done
  restart_agent 2
  log "node-2's agent killed (-9) and started again; its ranks and trainlet-pmix ran on"
  touch "$WORK/slow-go"
  "$CTL" wait trainjob/agentkill --for=condition=Complete --timeout=60s || fail "agentkill did not complete: $("$CTL" describe trainjob agentkill) $("$CTL" logs agentkill)"
  out=$("$CTL" logs agentkill)
  [ "$(grep -c "slow sum 21" <<<"$out")" = 6 ] || fail "agentkill: every rank should see 21: $out"
  ! grep -q "trainlet-pmix: fence" <<<"$out" || fail "agentkill: a PMIx fence failed after the restart: $out"
  [ "$("$CTL" describe trainjob agentkill | awk '/^Attempt:/ {print $2}')" = 1 ] || fail "agentkill: not in its first attempt"
  log "after an agent restart, PMIx fences are served again (MPI_Finalize's), and the job succeeds in attempt 1"

  # 8. The agent of node-2 is killed (-9) while it holds the fence of MPI_Finalize that node-2's
  # trainlet-pmix joined (node-1's ranks sleep before theirs, so the fence stays open). The old
  # agent had taken the request and contributed; the new one never saw it. trainlet-pmix's
  # rendezvous handles see the new agent's socket and send the fence again, so the fence
  # completes on node-2 too and the job succeeds in attempt 1. node-1's ranks wait for the
  # test's go, given once the new agent has registered (they slept 15 s, which under load could
  # end before the kill, and took that long otherwise).
  cat > "$WORK/late.py" <<'PY'
import os, sys, time
from mpi4py import MPI
comm = MPI.COMM_WORLD
total = comm.allreduce(comm.Get_rank() + 1)
print(f"rank {comm.Get_rank()} on {os.environ['TRAINLET_NODE']}: late sum {total}", flush=True)
if os.environ["TRAINLET_NODE"] == "node-1":
    while not os.path.exists(sys.argv[1]):
        time.sleep(0.05)
PY
  "$CTL" apply -f "$(direct_job fencekill 3 mpi-direct "" /usr/bin/python3 "$WORK/late.py" "$WORK/late-go")" >/dev/null
  wait_for 30 sh -c "[ \$('$CTL' logs fencekill | grep -c 'on node-2: late sum 21') -ge 2 ]" || fail "fencekill: node-2's ranks never got past their allreduce: $("$CTL" logs fencekill)"
  sleep 1  # node-2's ranks are in MPI_Finalize's fence, its agent holds the request
  agent2=${EXTRA_PIDS[-1]}
  [ "$(cat "/proc/$agent2/comm")" = trainlet-agent ] || fail "the last started process is not node-2's agent"
  disown "$agent2" 2>/dev/null || true
  registrations=$(grep -c "registered with" "$TRAINLET_HOME/logs/node-2.log" || true)
  kill -9 "$agent2"
  wait_for 5 sh -c "! kill -0 $agent2 2>/dev/null" || fail "node-2's agent did not die"
  restart_agent 2
  registered_again() { [ "$(grep -c "registered with" "$TRAINLET_HOME/logs/node-2.log")" -gt "$registrations" ]; }
  wait_for 20 registered_again || fail "node-2's new agent did not register"
  log "node-2's agent killed (-9) inside MPI_Finalize's fence and started again"
  touch "$WORK/late-go"
  "$CTL" wait trainjob/fencekill --for=condition=Complete --timeout=60s || fail "fencekill did not complete (a fence the old agent had taken was lost): $("$CTL" describe trainjob fencekill) $("$CTL" logs fencekill)"
  [ "$("$CTL" describe trainjob fencekill | awk '/^Attempt:/ {print $2}')" = 1 ] || fail "fencekill: not in its first attempt"
  log "a fence the killed agent had taken is sent again to the new one; the job succeeds in attempt 1"
fi

kill "$LAUNCHER_SAMPLER" 2>/dev/null || true
wait "$LAUNCHER_SAMPLER" 2>/dev/null || true
[ ! -s "$WORK/launchers" ] || fail "a launcher process ran during direct launch: $(head -3 "$WORK/launchers")"
log "no mpirun, orted or trainlet-exec at any sampled moment"
echo "PASS"
