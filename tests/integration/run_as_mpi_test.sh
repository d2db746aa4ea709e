#!/usr/bin/env bash
# Issue 19, "Ranks and secrets", for MPI: a real OpenMPI job (mpi-distributed, mpirun through
# trainlet-exec) whose container sets securityContext.runAsUser/runAsGroup runs every rank as that
# user, the ones the remote orted starts included: the orted is an exec session, and it runs as
# the job's user, not as the agent's (root here). Every rank has no_new_privs, so a setuid-root
# copy of `id` the test makes reports the rank's uid, not 0. describe names the user per node.
# Then (issue 19/16) the node's rendezvous as that user: a PMIx direct-launch job as nobody (its
# ranks and trainlet-pmix reach the agent on nobody's own endpoint) sums right, and plain shell
# ranks as nobody fence through `trainletctl rendezvous`. On a build before the fix both hung.
# And node-2's agent killed (-9) and started again between two fences of such ranks: alone, after
# an initializer-like replicated job as daemon, and beside another replicated job's rank; the
# restarted agent serves the main ranks on their endpoint each time.
# Needs root: it exits 77 (skipped) otherwise.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/netns_lib.sh"

if [ "$(id -u)" != 0 ]; then
  echo "SKIP: run_as needs root (this test switches ranks to the user nobody)"
  exit 77
fi
NOBODY=$(id -u nobody 2>/dev/null) || { echo "SKIP: no user nobody on this machine"; exit 77; }
NOGROUP=$(id -g nobody)
command -v mpirun >/dev/null || fail "mpirun not installed (apt-get install openmpi-bin)"

start_netns_cluster 2
log "cluster up in $NETNS_MODE mode"
# The user must reach its work dir under the test's 0700 temp dir (run_as_test.sh checks the
# refusal when it cannot).
chmod o+x "$WORK" "$TRAINLET_HOME" "$TRAINLET_HOME/agents"

# A setuid-root copy of id: without no_new_privs it would print 0 to any user that runs it.
mkdir -m 0755 "$WORK/suid"
cp /usr/bin/id "$WORK/suid/id"
chown root:root "$WORK/suid/id"
chmod 4755 "$WORK/suid/id"
[ "$(setpriv --reuid="$NOBODY" --regid="$NOGROUP" --clear-groups "$WORK/suid/id" -u)" = 0 ] ||
  fail "the setuid copy of id does not lift a plain process here (nosuid mount?)"

# The runtime: mpi-distributed with its container's securityContext set.
{
  sed -e 's/name: mpi-distributed/name: mpi-as-nobody/' "$TRAINLET_SOURCE_DIR/deploy/runtimes/mpi-distributed.yaml"
  printf '                      securityContext: {runAsUser: %s, runAsGroup: %s}\n' "$NOBODY" "$NOGROUP"
} > "$WORK/runtime.yaml"
"$CTL" apply -f "$WORK/runtime.yaml" >/dev/null

# 2 hosts x 2 ranks; each rank prints who it is, its no_new_privs, the setuid id's euid and host.
probe='echo ids=$(id -u):$(id -g):$(id -G) $(grep NoNewPrivs /proc/self/status | tr -d "\t ") euid=$('"$WORK"'/suid/id -u) on $(hostname)'
{
  printf 'apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata:\n  name: asnobody\n'
  printf 'spec:\n  runtimeRef:\n    name: mpi-as-nobody\n  trainer:\n    numNodes: 2\n    numProcPerNode: 2\n'
  [ "$NETNS_MODE" = loopback ] && printf '    env:\n      - {name: OMPI_MCA_btl, value: "self,tcp"}\n'
  printf '    command:\n      - mpirun\n      - -np\n      - "4"\n      - /bin/sh\n      - -c\n'
  printf "      - '%s'\n" "$probe"
} > "$WORK/job.yaml"
"$CTL" apply -f "$WORK/job.yaml" >/dev/null
"$CTL" wait trainjob/asnobody --for=condition=Complete --timeout=120s >/dev/null ||
  fail "asnobody did not complete: $("$CTL" describe trainjob asnobody) $("$CTL" logs asnobody 2>&1)"
out=$("$CTL" logs asnobody)
want="ids=$NOBODY:$NOGROUP:$NOGROUP NoNewPrivs:1 euid=$NOBODY"
[ "$(grep -c "] $want on host" <<<"$out")" = 4 ] || fail "every rank must run as $NOBODY:$NOGROUP with no_new_privs: $out"
[ "$(grep -c " on host2$" <<<"$out")" = 2 ] || fail "two ranks must run on host2, under its orted: $out"
log "all 4 ranks ran as $NOBODY:$NOGROUP with no_new_privs, the 2 the orted on host2 started included"

# describe names the user the launcher's node runs its ranks as (the other runs only the orted).
d=$("$CTL" describe trainjob asnobody)
grep -A1 "^Runs as:" <<<"$d" | grep -Eq "^  node-[12] +nobody \(uid $NOBODY, gid $NOGROUP\)$" ||
  fail "describe must say who the launcher node's ranks run as: $d"
log "describe: the launcher node's ranks run as nobody (uid $NOBODY, gid $NOGROUP)"

# as_nobody_runtime BASE NAME: BASE's runtime, renamed NAME, its container running as nobody.
as_nobody_runtime() {
  {
    sed -e "s/name: $1\$/name: $2/" "$TRAINLET_SOURCE_DIR/deploy/runtimes/$1.yaml"
    printf '                      securityContext: {runAsUser: %s, runAsGroup: %s}\n' "$NOBODY" "$NOGROUP"
  } > "$WORK/$2.yaml"
  "$CTL" apply -f "$WORK/$2.yaml" >/dev/null
}
# nobody runs trainletctl, mpi-allreduce and trainlet-pmix from the build: a build dir it cannot
# reach (a private home) leaves nothing to check here.
if ! setpriv --reuid="$NOBODY" --regid="$NOGROUP" --clear-groups test -x "$CTL"; then
  log "nobody cannot run $CTL: rendezvous as nobody not checked"
  exit 0
fi

# Plain shell ranks as nobody: put, fence, read the next rank's key (from the fence's snapshot).
as_nobody_runtime plain plain-as-nobody
{
  printf 'apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata:\n  name: fencenobody\n'
  printf 'spec:\n  runtimeRef:\n    name: plain-as-nobody\n  trainer:\n    numNodes: 2\n    numProcPerNode: 1\n'
  printf '    command:\n      - /bin/sh\n      - -c\n'
  printf "      - 'set -e; %s rendezvous put k/\$TRAINLET_RANK \$(id -u); %s rendezvous fence --timeout 20s; echo rank \$TRAINLET_RANK read \$(%s rendezvous get k/\$(( (TRAINLET_RANK + 1) %% 2 )))'\n" "$CTL" "$CTL" "$CTL"
} > "$WORK/fencenobody.yaml"
"$CTL" apply -f "$WORK/fencenobody.yaml" >/dev/null
"$CTL" wait trainjob/fencenobody --for=condition=Complete --timeout=60s >/dev/null ||
  fail "fencenobody did not complete: $("$CTL" describe trainjob fencenobody) $("$CTL" logs fencenobody 2>&1)"
out=$("$CTL" logs fencenobody)
[ "$(grep -c "rank [01] read $NOBODY\$" <<<"$out")" = 2 ] || fail "both ranks must read the other's put: $out"
log "2 shell ranks as nobody fenced through their own rendezvous endpoint"

# The agent of node-2 is killed (-9) between two fences of shell ranks as nobody and started again
# on its state dir: it adopts the step and binds nobody's endpoint again, so the second fence (a
# new trainletctl, connecting afresh) completes.
agent_ep=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["agent_endpoint"])' "$TRAINLET_HOME/endpoints.json")
agent2=${EXTRA_PIDS[2]}
# restart_agent2: kill -9 node-2's agent ($agent2) and start another on its state dir.
restart_agent2() {
  [ "$(cat "/proc/$agent2/comm")" = trainlet-agent ] || fail "$agent2 is not node-2's agent"
  disown "$agent2" 2>/dev/null || true  # no "Killed" line from this shell
  kill -9 "$agent2"
  wait_for 5 sh -c "! kill -0 $agent2 2>/dev/null" || fail "node-2's agent did not die"
  netns_host_cmd 2 host2
  "${NETNS_CMD[@]}" "$TRAINLET_BIN/trainlet-agent" --name node-2 \
    --address "${NETNS_HOSTS[1]}" --coordinator "$agent_ep" \
    --coordinator-key "$TRAINLET_HOME/keys/coordinator.key.pub" --key "$TRAINLET_HOME/keys/node-2.key" \
    --state-dir "$TRAINLET_HOME/agents/node-2" --slots 4 --heartbeat-ms 200 --metrics-address "" \
    >> "$TRAINLET_HOME/logs/node-2.log" 2>&1 &
  agent2=$!
  EXTRA_PIDS+=("$agent2")
}
# refence_command GO: each rank fences, waits for the file GO, puts, fences again and reads the
# other rank's put.
refence_command() {
  printf 'set -e; %s rendezvous fence --timeout 20s; echo fenced once; while [ ! -e %s ]; do sleep 0.1; done; %s rendezvous put b/$TRAINLET_RANK ok$TRAINLET_RANK; %s rendezvous fence --timeout 20s; echo rank $TRAINLET_RANK after restart read $(%s rendezvous get b/$(( (TRAINLET_RANK + 1) %% 2 )))' \
    "$CTL" "$1" "$CTL" "$CTL" "$CTL"
}
{
  printf 'apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata:\n  name: refence\n'
  printf 'spec:\n  runtimeRef:\n    name: plain-as-nobody\n  trainer:\n    numNodes: 2\n    numProcPerNode: 1\n'
  printf '    command:\n      - /bin/sh\n      - -c\n'
  printf "      - '%s'\n" "$(refence_command "$WORK/refence-go")"
} > "$WORK/refence.yaml"
"$CTL" apply -f "$WORK/refence.yaml" >/dev/null
wait_for 30 sh -c "[ \$('$CTL' logs refence 2>/dev/null | grep -c 'fenced once') = 2 ]" ||
  fail "refence: the first fence did not complete: $("$CTL" logs refence 2>&1)"
restart_agent2
touch "$WORK/refence-go"
"$CTL" wait trainjob/refence --for=condition=Complete --timeout=60s >/dev/null ||
  fail "refence did not complete: $("$CTL" describe trainjob refence) $("$CTL" logs refence 2>&1)"
out=$("$CTL" logs refence)
[ "$(grep -c "rank [01] after restart read ok[01]$" <<<"$out")" = 2 ] || fail "refence: both ranks must read the other's put: $out"
log "node-2's agent restarted between two fences of ranks as nobody: it bound their endpoint again"

# steps_refence NAME GO REPLICATED_JOBS [NODE_DEPENDS]: a 2 x 1 TrainJob of refence's ranks as
# nobody (GO: its go file) on a TrainingRuntime of its own whose replicatedJobs are
# REPLICATED_JOBS (YAML, a `prep` beside `node`) and `node`, with NODE_DEPENDS (YAML) if given;
# node-2's agent is killed and started again between the two fences.
steps_refence() {
  cat > "$WORK/$1.yaml" <<YAML
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainingRuntime
metadata:
  name: rt-$1
spec:
  mlPolicy:
    numNodes: 2
  template:
    spec:
      replicatedJobs:
$3
        - name: node
${4:-}
          template:
            metadata:
              labels:
                trainer.kubeflow.org/trainjob-ancestor-step: trainer
            spec:
              template:
                spec:
                  containers:
                    - name: node
                      securityContext: {runAsUser: $NOBODY, runAsGroup: $NOGROUP}
---
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: $1
spec:
  runtimeRef:
    kind: TrainingRuntime
    name: rt-$1
  trainer:
    numNodes: 2
    numProcPerNode: 1
    command:
      - /bin/sh
      - -c
      - '$(refence_command "$2")'
YAML
  "$CTL" apply -f "$WORK/$1.yaml" >/dev/null
  wait_for 30 sh -c "[ \$('$CTL' logs $1 2>/dev/null | grep -c 'fenced once') = 2 ]" ||
    fail "$1: the first fence did not complete: $("$CTL" describe trainjob "$1") $("$CTL" logs "$1" 2>&1)"
  wait_for 30 sh -c "[ \$('$CTL' logs $1 --step prep 2>/dev/null | grep -c '^\[prep [01]\] prep as') = 2 ]" ||
    fail "$1: prep did not start on both nodes: $("$CTL" logs "$1" --step prep 2>&1)"
  restart_agent2
  touch "$2"
  "$CTL" wait "trainjob/$1" --for=condition=Complete --timeout=60s >/dev/null ||
    fail "$1 did not complete: $("$CTL" describe trainjob "$1") $("$CTL" logs "$1" 2>&1)"
  out=$("$CTL" logs "$1")
  [ "$(grep -c "rank [01] after restart read ok[01]$" <<<"$out")" = 2 ] || fail "$1: both ranks must read the other's put: $out"
}

# A replicated job `prep` as another user (daemon) that the node's ranks wait for (Complete), as an
# initializer: its exit, 0, fails no fence (before the fix the coordinator aborted fence 1 with
# "rank 2 on node-1 exited with code 0 before joining fence 1"), and the restarted agent, which
# finds prep's step and the node's, serves the node's rank on nobody's endpoint.
if DAEMON=$(id -u daemon 2>/dev/null) && DAEMON_GID=$(id -g daemon); then
  steps_refence prepfence "$WORK/prepfence-go" "        - name: prep
          template:
            spec:
              template:
                spec:
                  containers:
                    - name: prep
                      command: [/bin/sh, -c, 'echo prep as \$(id -u)']
                      securityContext: {runAsUser: $DAEMON, runAsGroup: $DAEMON_GID}" \
    "          dependsOn: [{name: prep, status: Complete}]"
  [ "$("$CTL" logs prepfence --step prep | grep -c "prep as $DAEMON\$")" = 2 ] ||
    fail "prepfence: prep must have run as daemon: $("$CTL" logs prepfence --step prep 2>&1)"
  log "an initializer-like step as daemon, then ranks as nobody: its exit failed no fence, and node-2's restarted agent served them"
else
  log "no user daemon: a step as another user before the ranks not checked"
fi

# A replicated job `prep` beside the ranks, started once they are Ready and running until the
# second fence may start: on each node the node's rank and prep's run under two steps of the
# attempt, prep's last, both adopted by the restarted agent. The restarted agent restores the rendezvous of the ranks that take part
# (the node's): before the fix it restored the last step's, prep's rank, so rank 1's second fence
# was DENIED. (prep runs as nobody too: ranks of two users beside each other need a shared
# securityContext.fsGroup, run_as_users_test.sh.)
steps_refence sidefence "$WORK/sidefence-go" "        - name: prep
          dependsOn: [{name: node, status: Ready}]
          template:
            spec:
              template:
                spec:
                  containers:
                    - name: prep
                      command: [/bin/sh, -c, 'echo prep as \$(id -u); while [ ! -e $WORK/sidefence-go ]; do sleep 0.1; done']
                      securityContext: {runAsUser: $NOBODY, runAsGroup: $NOGROUP}"
log "ranks as nobody with a step beside them: node-2's restarted agent restored the node's ranks, not the step's"

if [ -x "$TRAINLET_BIN/trainlet-pmix" ] && [ -x "$TRAINLET_BIN/mpi-allreduce" ]; then
  as_nobody_runtime mpi-direct mpi-direct-as-nobody
  {
    printf 'apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata:\n  name: directnobody\n'
    printf 'spec:\n  runtimeRef:\n    name: mpi-direct-as-nobody\n  trainer:\n    numNodes: 2\n    numProcPerNode: 2\n'
    [ "$NETNS_MODE" = loopback ] && printf '    env:\n      - {name: OMPI_MCA_btl, value: "self,tcp"}\n'
    printf '    command:\n      - "%s"\n' "$TRAINLET_BIN/mpi-allreduce"
  } > "$WORK/directnobody.yaml"
  "$CTL" apply -f "$WORK/directnobody.yaml" >/dev/null
  "$CTL" wait trainjob/directnobody --for=condition=Complete --timeout=60s >/dev/null ||
    fail "directnobody did not complete: $("$CTL" describe trainjob directnobody) $("$CTL" logs directnobody 2>&1)"
  out=$("$CTL" logs directnobody)
  [ "$(grep -c 'allreduce sum 10 (expected 10) OK' <<<"$out")" = 4 ] || fail "directnobody: 4 ranks must sum 10: $out"
  # Nothing of nobody's endpoint is left once its last attempt ended.
  left=$(find "$TRAINLET_HOME/agents" -name 'uid-*.sock' | wc -l)
  [ "$left" = 0 ] || fail "$left per-user rendezvous sockets left after the jobs ended"
  log "PMIx direct launch as nobody: 4 ranks summed 10"
else
  log "trainlet-pmix or mpi-allreduce not built: direct launch as nobody not checked"
fi
