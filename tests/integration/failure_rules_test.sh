#!/usr/bin/env bash
# Failure rules and finished jobs (issue 18; issue 19, defect 9), on a local cluster:
# 1. a runtime's FailJobSet rule (for ranks that exit with a code) fails a job with a rank exiting
#    1 after attempt 1, maxRestarts 3 notwithstanding, and describe names the rule;
# 2. the same runtime restarts a job whose rank is killed by a signal (the rule does not match);
# 3. trainlet.io/restart-policy: ExitCode: exit 3 fails at once, a SIGKILLed rank restarts;
# 4. ttlSecondsAfterFinished: 2 deletes a succeeded job and its node dirs a few seconds later;
# 5. delete removes the job's logs and work dirs on its nodes, and a job applied again under the
#    same name shows none of the old one's output in `logs`. The first one ran two attempts, so
#    the second one's attempt 1 is older than what its nodes last ran of the name: they start it
#    all the same (they forgot the deleted job's attempts).
source "$(dirname "$0")/lib.sh"

start_cluster 2 --slots 2

# runtime NAME EXTRA: a plain ClusterTrainingRuntime NAME with maxRestarts 3 and EXTRA (lines of
# its JobSet spec, indented 6) after the failurePolicy's maxRestarts.
runtime() {
  printf 'apiVersion: trainer.kubeflow.org/v1alpha1\nkind: ClusterTrainingRuntime\nmetadata:\n  name: %s\nspec:\n  mlPolicy:\n    numNodes: 1\n  template:\n    spec:\n      failurePolicy:\n        maxRestarts: 3\n%s      replicatedJobs:\n        - name: node\n          template:\n            spec:\n              template:\n                spec:\n                  containers:\n                    - name: node\n' "$1" "$2"
}
RULES='        rules:
          - name: failOnUserError
            action: FailJobSet
            onJobFailureReasons: [BackoffLimitExceeded]
            onJobFailureMessagePatterns: ["exited with code"]
            targetReplicatedJobs: [node]
'
# job_on RUNTIME NAME NODES SCRIPT [ANNOTATION]: a TrainJob file on RUNTIME.
job_on() {
  local file; file=$(write_job "$2" "$3" 1 "$4")
  sed -i "s/name: plain\$/name: $1/" "$file"
  if [ -n "${5:-}" ]; then
    sed -i "s|^  name: $2\$|  name: $2\n  annotations:\n    $5|" "$file"
  fi
  echo "$file"
}
rank_pid() {  # rank_pid JOB RANK
  "$CTL" get trainjobs "$1" -o json |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["jobs"][0]["ranks"][int(sys.argv[1])]["pid"])' "$2"
}
running_attempt() {  # running_attempt JOB N: attempt N of JOB is Running
  "$CTL" get trainjobs "$1" -o json | python3 -c '
import json,sys
j = json.load(sys.stdin)["jobs"][0]
sys.exit(0 if j.get("attempt") == int(sys.argv[1]) and "RUNNING" in str(j.get("jobPhase", "")).upper() else 1)' "$2"
}
node_dirs() {  # node_dirs JOB: the job's logs and work dirs on every agent, one per line
  ls -d "$TRAINLET_HOME"/agents/*/logs/"$1" "$TRAINLET_HOME"/agents/*/work/"$1" 2>/dev/null || true
}

runtime rules "$RULES" > "$WORK/rules.yaml"
runtime plain-retry "" > "$WORK/retry.yaml"
runtime ttl-two "      ttlSecondsAfterFinished: 2
" > "$WORK/ttl.yaml"
"$CTL" apply -f "$WORK/rules.yaml" >/dev/null
"$CTL" apply -f "$WORK/retry.yaml" >/dev/null
"$CTL" apply -f "$WORK/ttl.yaml" >/dev/null

# 1. FailJobSet on a rank that exits 1.
"$CTL" apply -f "$(job_on rules user-error 2 'if [ "$TRAINLET_RANK" = 1 ]; then sleep 1; exit 1; fi; sleep 300')" >/dev/null
"$CTL" wait trainjob/user-error --for=condition=Failed --timeout=60s >/dev/null ||
  fail "user-error not Failed: $("$CTL" describe trainjob user-error)"
d=$("$CTL" describe trainjob user-error)
assert_contains "$d" "Failure rule:  failOnUserError (FailJobSet) fired on attempt 1: rank 1 on" "describe"
assert_contains "$d" "exited with code 1" "describe"
[ "$("$CTL" get trainjobs user-error -o json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["jobs"][0]["attempts"]))')" = 1 ] ||
  fail "user-error ran more than one attempt: $d"
log "FailJobSet: Failed after attempt 1 (maxRestarts 3), describe names the rule"

# 2. The same runtime, a rank killed by a signal: restarted.
"$CTL" apply -f "$(job_on rules killed 2 'sleep 300')" >/dev/null
wait_for 30 running_attempt killed 1 || fail "killed never Running: $("$CTL" describe trainjob killed)"
kill -9 "$(rank_pid killed 1)"
wait_for 30 running_attempt killed 2 || fail "killed not restarted: $("$CTL" describe trainjob killed)"
d=$("$CTL" describe trainjob killed)
assert_contains "$d" "killed by signal 9" "attempt 1 cause"
case "$d" in *"Failure rule:"*) fail "a rule fired for a signal: $d" ;; esac
"$CTL" delete trainjob killed >/dev/null
log "signal: restarted, no rule fired"

# 3. ExitCode: exit 3 is permanent, SIGKILL is retried.
"$CTL" apply -f "$(job_on plain-retry exit-three 1 'sleep 1; exit 3' 'trainlet.io/restart-policy: ExitCode')" >/dev/null
"$CTL" wait trainjob/exit-three --for=condition=Failed --timeout=60s >/dev/null ||
  fail "exit-three not Failed: $("$CTL" describe trainjob exit-three)"
d=$("$CTL" describe trainjob exit-three)
assert_contains "$d" "Failure rule:  ExitCode (permanent exit code 3) fired on attempt 1" "describe"
"$CTL" apply -f "$(job_on plain-retry exit-kill 1 'sleep 300' 'trainlet.io/restart-policy: ExitCode')" >/dev/null
wait_for 30 running_attempt exit-kill 1 || fail "exit-kill never Running"
kill -9 "$(rank_pid exit-kill 0)"
wait_for 30 running_attempt exit-kill 2 || fail "exit-kill not restarted: $("$CTL" describe trainjob exit-kill)"
"$CTL" delete trainjob exit-kill >/dev/null
bad=$(job_on plain-retry bad-policy 1 'true' 'trainlet.io/restart-policy: Sometimes')
out=$("$CTL" apply -f "$bad" 2>&1) && fail "a bad restart policy was accepted: $out"
assert_contains "$out" "metadata.annotations[trainlet.io/restart-policy]: must be ExitCode or OnFailure" "refusal"
log "ExitCode: exit 3 failed at once, SIGKILL restarted, a bad value refused"

# 4. ttlSecondsAfterFinished: 2.
"$CTL" apply -f "$(job_on ttl-two short 2 'echo short-lived; mkdir -p "$TRAINLET_WORK_DIR"; echo x > "$TRAINLET_WORK_DIR/f"')" >/dev/null
"$CTL" wait trainjob/short --for=condition=Complete --timeout=60s >/dev/null || fail "short not Complete"
assert_contains "$("$CTL" describe trainjob short)" "TTL:" "describe"
[ -n "$(node_dirs short)" ] || fail "short left no logs on its nodes"
t0=$(date +%s)
"$CTL" wait trainjob/short --for=delete --timeout=30s >/dev/null || fail "short not deleted by its TTL"
took=$(( $(date +%s) - t0 ))
wait_for 10 sh -c "[ -z \"\$(ls -d '$TRAINLET_HOME'/agents/*/logs/short '$TRAINLET_HOME'/agents/*/work/short 2>/dev/null)\" ]" ||
  fail "short's dirs outlived it: $(node_dirs short)"
log "ttlSecondsAfterFinished 2: deleted $took s after Complete, node dirs gone"

# 5. Delete removes the node dirs; the same name again shows none of the old output.
"$CTL" apply -f "$(job_on plain-retry reused 2 '[ "$TRAINLET_ATTEMPT" = 2 ] || exit 1; echo first-incarnation-output')" >/dev/null
"$CTL" wait trainjob/reused --for=condition=Complete --timeout=60s >/dev/null || fail "reused not Complete"
[ "$("$CTL" get trainjobs reused -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["jobs"][0]["attempt"])')" = 2 ] ||
  fail "reused did not run 2 attempts: $("$CTL" describe trainjob reused)"
assert_contains "$("$CTL" logs reused)" "first-incarnation-output" "logs"
"$CTL" delete trainjob reused >/dev/null
"$CTL" wait trainjob/reused --for=delete --timeout=30s >/dev/null || fail "reused not deleted"
wait_for 10 sh -c "[ -z \"\$(ls -d '$TRAINLET_HOME'/agents/*/logs/reused '$TRAINLET_HOME'/agents/*/work/reused 2>/dev/null)\" ]" ||
  fail "reused's dirs outlived its delete: $(node_dirs reused)"
"$CTL" apply -f "$(job_on plain-retry reused 2 'echo second-incarnation-output')" >/dev/null
"$CTL" wait trainjob/reused --for=condition=Complete --timeout=30s >/dev/null ||
  fail "reused (2) not Complete: $("$CTL" describe trainjob reused)"
out=$("$CTL" logs reused)
assert_contains "$out" "second-incarnation-output" "logs"
case "$out" in *first-incarnation-output*) fail "the new job shows the old one's output: $out" ;; esac
log "delete: node dirs gone; the reused name shows only its own output"

# 5b. delete --wait=false, and at once an apply of the name: the new job's logs hold none of the
# old one's output, even when its plan reaches a node whose old step still sweeps up (the old data
# moves aside there, and goes once nothing of the name runs). That race is hit in some runs only
# (about one in three before the fix); job_data_purge_test covers it every time.
"$CTL" apply -f "$(job_on plain-retry rerun 2 'echo old-run-output; sleep 60')" >/dev/null
wait_for 30 sh -c "[ \"\$('$CTL' logs rerun 2>/dev/null | grep -c old-run-output)\" = 2 ]" ||
  fail "rerun's ranks did not start: $("$CTL" describe trainjob rerun)"
again=$(job_on plain-retry rerun 2 'echo new-run-output')
"$CTL" delete trainjob rerun --wait=false >/dev/null
wait_for 20 "$CTL" apply -f "$again" >/dev/null || fail "rerun could not be applied again"
"$CTL" wait trainjob/rerun --for=condition=Complete --timeout=30s >/dev/null ||
  fail "rerun (2) not Complete: $("$CTL" describe trainjob rerun)"
out=$("$CTL" logs rerun)
assert_contains "$out" "new-run-output" "logs"
case "$out" in *old-run-output*) fail "the new job shows the old one's output: $out" ;; esac
wait_for 20 sh -c "[ -z \"\$(find '$TRAINLET_HOME'/agents/*/purging -mindepth 1 2>/dev/null)\" ]" ||
  fail "an earlier job's data was left: $(find "$TRAINLET_HOME"/agents/*/purging -mindepth 1)"
log "delete --wait=false then apply: the new job shows only its own output; nothing left aside"

# 6. A port error is the failure of the replicated jobs whose workers it hits (issue 18): a rule
# with targetReplicatedJobs: [node] fails the job at once when the agents cannot reserve the
# training's MASTER_PORT (main matched it against untargeted rules only, and restarted it 3 times).
# Both agents start again with a one-port range whose port this test holds on their addresses.
python3 - "$WORK/held-port" <<'PY' &
import random, socket, sys, os, time
for _ in range(200):
    p = random.randint(20000, 29999)
    socks = []
    try:
        for addr in ("127.0.0.2", "127.0.0.3"):
            s = socket.socket()
            s.bind((addr, p))
            s.listen(1)
            socks.append(s)
    except OSError:
        for s in socks: s.close()
        continue
    open(sys.argv[1] + ".tmp", "w").write(str(p))
    os.rename(sys.argv[1] + ".tmp", sys.argv[1])
    deadline = time.time() + 120
    while time.time() < deadline and not os.path.exists(sys.argv[1] + ".done"):
        time.sleep(0.1)
    sys.exit(0)
sys.exit(1)
PY
HOLDER_PID=$!
wait_for 10 test -s "$WORK/held-port" || fail "no port could be held"
port=$(cat "$WORK/held-port")
for node in node-1 node-2; do
  pid=$(awk '{print $1}' "$TRAINLET_HOME/pids/$node.pid")
  mapfile -d '' args < "/proc/$pid/cmdline"
  kill "$pid"
  wait_for 15 sh -c "! kill -0 $pid 2>/dev/null" || fail "agent $node did not stop"
  setsid "${args[@]}" --worker-ports "$port-$port" >> "$TRAINLET_HOME/logs/$node.log" 2>&1 < /dev/null &
  echo "$! $(awk '{print $22}' "/proc/$!/stat")" > "$TRAINLET_HOME/pids/$node.pid"
done
wait_for 30 sh -c "[ \$('$CTL' get nodes | grep -cE '^node-[12] +Ready') = 2 ]" \
  || fail "the agents are not Ready again: $("$CTL" get nodes)"
cat > "$WORK/ports-rules.yaml" <<EOF
apiVersion: trainer.kubeflow.org/v1alpha1
kind: ClusterTrainingRuntime
metadata:
  name: torch-rules
spec:
  mlPolicy:
    numNodes: 1
    torch: {}
  template:
    spec:
      failurePolicy:
        maxRestarts: 3
        rules:
          - name: nodePortsGone
            action: FailJobSet
            onJobFailureReasons: [BackoffLimitExceeded]
            targetReplicatedJobs: [node]
      replicatedJobs:
        - name: node
          template:
            spec:
              template:
                spec:
                  containers:
                    - name: node
EOF
"$CTL" apply -f "$WORK/ports-rules.yaml" >/dev/null
"$CTL" apply -f "$(job_on torch-rules no-ports 2 'true')" >/dev/null
"$CTL" wait trainjob/no-ports --for=condition=Failed --timeout=60s >/dev/null ||
  fail "no-ports not Failed: $("$CTL" describe trainjob no-ports)"
d=$("$CTL" describe trainjob no-ports)
assert_contains "$d" "Failure rule:  nodePortsGone (FailJobSet) fired on attempt 1" "describe"
[ "$("$CTL" get trainjobs no-ports -o json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["jobs"][0]["attempts"]))')" = 1 ] ||
  fail "no-ports ran more than one attempt: $d"
touch "$WORK/held-port.done"
kill "$HOLDER_PID" 2>/dev/null || true
log "a port error fired the rule targeting node: Failed after attempt 1"
echo PASS
