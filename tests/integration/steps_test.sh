#!/usr/bin/env bash
# Replicated jobs in order (issue 18): a runtime's dataset-initializer step runs on every node
# before `node`, which depends on it with Complete; a failing initializer fails the job naming the
# step, and the node ranks never start; a bad dependsOn is refused at apply, by path.
source "$(dirname "$0")/lib.sh"

start_cluster 2 --slots 2

# steps_runtime NAME INIT_SCRIPT: a plain runtime NAME (no restarts) whose dataset-initializer runs
# `sh -c INIT_SCRIPT` and whose node depends on it with Complete.
steps_runtime() {
  cat <<EOF
apiVersion: trainer.kubeflow.org/v1alpha1
kind: ClusterTrainingRuntime
metadata:
  name: $1
spec:
  mlPolicy:
    numNodes: 1
  template:
    spec:
      failurePolicy:
        maxRestarts: 0
      replicatedJobs:
        - name: dataset-initializer
          template:
            spec:
              template:
                spec:
                  containers:
                    - name: dataset-initializer
                      command: ["/bin/sh", "-c", "$2"]
        - name: node
          dependsOn:
            - name: dataset-initializer
              status: Complete
          template:
            spec:
              template:
                spec:
                  containers:
                    - name: node
                      command: ["/bin/true"]
EOF
}

# steps_job NAME RUNTIME: a 2-node TrainJob whose ranks fail unless the initializer's file is in
# their work dir.
steps_job() {
  cat <<EOF
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: $1
spec:
  runtimeRef:
    name: $2
  trainer:
    numNodes: 2
    command: ["/bin/sh", "-c", "test -f fetched.txt && echo trained on \$(cat fetched.txt)"]
EOF
}

# 1. The initializer sleeps a second, then writes a file into its work dir; node finds it.
{ steps_runtime init-ok 'sleep 1; echo dataset-of-$TRAINLET_NODE > fetched.txt; echo fetched on $TRAINLET_NODE'
  echo "---"; steps_job ordered init-ok; } > "$WORK/ok.yaml"
"$CTL" apply -f "$WORK/ok.yaml" --wait --timeout 60s > "$WORK/apply.out" 2>&1 \
  || fail "the job with an initializer did not succeed: $(cat "$WORK/apply.out"; "$CTL" describe trainjob ordered)"
describe=$("$CTL" describe trainjob ordered)
assert_contains "$describe" "Steps (attempt 1):" "describe shows the steps"
[ "$(grep -cE '^ +dataset-initializer +node-[0-9]+ +1 +Complete' <<<"$describe")" -eq 2 ] \
  || fail "the initializer is not Complete on both nodes: $describe"
[ "$(grep -cE '^ +node +node-[0-9]+ +1 +Complete' <<<"$describe")" -eq 2 ] \
  || fail "node is not Complete on both nodes: $describe"
assert_contains "$describe" "StepCompleted" "the step's event"
logs=$("$CTL" logs ordered --step dataset-initializer)
assert_contains "$logs" "[dataset-initializer 0] fetched on node-" "logs --step"
assert_contains "$logs" "[dataset-initializer 1] fetched on node-" "logs --step, second node"
one=$("$CTL" logs ordered --step dataset-initializer --rank 1)
assert_contains "$one" "fetched on node-" "logs --step --rank"
main=$("$CTL" logs ordered --rank 0)
assert_contains "$main" "trained on dataset-of-node-" "the node rank read the initializer's file"
log "the initializer ran on both nodes before node, which found its file"

# 2. The initializer fails: the job fails naming the step, and the node ranks never start.
{ steps_runtime init-bad 'echo cannot fetch; exit 3'; echo "---"; steps_job broken init-bad; } \
  > "$WORK/bad.yaml"
if "$CTL" apply -f "$WORK/bad.yaml" --wait --timeout 60s > "$WORK/apply.out" 2>&1; then
  fail "a job whose initializer exits 3 succeeded"
fi
json=$("$CTL" get trainjobs broken -o json)
python3 - "$json" <<'EOF' || fail "the failed initializer's job: $("$CTL" describe trainjob broken)"
import json, sys
job = json.loads(sys.argv[1])["jobs"][0]
assert job["jobPhase"] == "JOB_PHASE_FAILED", job["jobPhase"]
cause = job["attempts"][-1]["cause"]
assert cause.startswith("step dataset-initializer on node-") and "exited with code 3" in cause, cause
for r in job["ranks"]:
    if not r.get("step"):
        assert not r.get("pid"), f"node rank {r['rank']} started: {r}"
EOF
log "a failed initializer fails the job naming the step; node never started"

# 3. A bad dependsOn is refused at apply, by path, and stores nothing.
bad_dep() {  # NAME DEPS-YAML (the dependsOn list items of node)
  cat <<EOF
apiVersion: trainer.kubeflow.org/v1alpha1
kind: ClusterTrainingRuntime
metadata:
  name: $1
spec:
  template:
    spec:
      replicatedJobs:
        - name: a
          dependsOn: [{name: node, status: Complete}]
          template: {spec: {template: {spec: {containers: [{name: a, command: ["true"]}]}}}}
        - name: b
          template: {spec: {template: {spec: {containers: [{name: b, command: ["true"]}]}}}}
        - name: node
          dependsOn: [$2]
          template: {spec: {template: {spec: {containers: [{name: node, command: ["true"]}]}}}}
EOF
}
bad_dep cycle '{name: a, status: Complete}' > "$WORK/cycle.yaml"
if "$CTL" apply -f "$WORK/cycle.yaml" 2> "$WORK/err"; then fail "a dependsOn cycle was accepted"; fi
assert_contains "$(cat "$WORK/err")" "spec.template.spec.replicatedJobs[0].dependsOn: dependency cycle: a -> node -> a" "cycle"
bad_dep unknown '{name: foo, status: Complete}' > "$WORK/unknown.yaml"
if "$CTL" apply -f "$WORK/unknown.yaml" 2> "$WORK/err"; then fail "an unknown dependsOn was accepted"; fi
assert_contains "$(cat "$WORK/err")" "ClusterTrainingRuntime/unknown: spec.template.spec.replicatedJobs[2].dependsOn[0].name: no replicated job \"foo\" in this runtime" "unknown name"
bad_dep many '{name: b, status: Ready}, {name: b, status: Complete}, {name: b, status: Ready}, {name: b, status: Ready}, {name: b, status: Ready}, {name: b, status: Ready}' > "$WORK/many.yaml"
if "$CTL" apply -f "$WORK/many.yaml" 2> "$WORK/err"; then fail "6 dependsOn entries were accepted"; fi
assert_contains "$(cat "$WORK/err")" "spec.template.spec.replicatedJobs[2].dependsOn" "more than 5"
# Nothing was stored: a TrainJob on the refused runtime finds none.
steps_job on-cycle cycle > "$WORK/on-cycle.yaml"
if "$CTL" apply -f "$WORK/on-cycle.yaml" 2> "$WORK/err"; then fail "the refused runtime was stored"; fi
assert_contains "$(cat "$WORK/err")" "spec.runtimeRef" "a job on the refused runtime"
log "bad dependsOn refused by path"

# 4. dependsOn is JobSet's, across nodes: node-rank 1's initializer takes 4 s longer than node-rank
# 0's, and no `node` rank starts before the last initializer completed, on either node (main
# started node-rank 0's ranks as soon as its own initializer was done). Each writes its time.
{ steps_runtime init-slow 'sleep $((1 + 4 * TRAINLET_NODE_RANK)); echo init-done $(date +%s%N)'
  echo "---"
  cat <<EOF
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: across
spec:
  runtimeRef:
    name: init-slow
  trainer:
    numNodes: 2
    command: ["/bin/sh", "-c", "echo node-start \$(date +%s%N)"]
EOF
} > "$WORK/across.yaml"
"$CTL" apply -f "$WORK/across.yaml" --wait --timeout 60s > "$WORK/apply.out" 2>&1 \
  || fail "the job with a slow initializer did not succeed: $(cat "$WORK/apply.out"; "$CTL" describe trainjob across)"
inits=$("$CTL" logs across --step dataset-initializer)
mains=$("$CTL" logs across)
python3 - "$inits" "$mains" <<'EOF' || fail "a node rank started before every initializer completed: $inits / $mains"
import re, sys
done = [int(t) for t in re.findall(r"init-done (\d+)", sys.argv[1])]
starts = [int(t) for t in re.findall(r"node-start (\d+)", sys.argv[2])]
assert len(done) == 2 and len(starts) == 2, (done, starts)
assert min(starts) >= max(done), f"first node start {min(starts)} < last initializer {max(done)}"
assert max(done) - min(done) > 3_000_000_000, "the initializers did not differ by 4 s"
EOF
log "node ranks on every node waited for the slowest node's initializer"
