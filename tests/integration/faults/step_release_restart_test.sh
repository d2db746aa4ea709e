#!/usr/bin/env bash
# dependsOn across nodes outlives a coordinator crash (issue 18, coordinator/step_release.h): a
# 2-node job's `node` ranks wait for every node's dataset-initializer to be Complete, held by the
# coordinator. It is killed with SIGKILL while it holds them and restarted on the same store: it
# holds them again and starts them once the initializers completed. The job completes in its first
# attempt, and each `node` rank started exactly once. (Before, the restarted coordinator held
# nothing: the ranks never started until the start timeout restarted the attempt.)
source "$(dirname "$0")/../lib.sh"

start_cluster 2 --slots 2
remember_coordinator
MARKS="$WORK/marks"
mkdir -p "$MARKS"

cat > "$WORK/held.yaml" <<YAML
apiVersion: trainer.kubeflow.org/v1alpha1
kind: ClusterTrainingRuntime
metadata:
  name: init-then-node
spec:
  mlPolicy:
    numNodes: 1
  template:
    spec:
      failurePolicy:
        maxRestarts: 2
      replicatedJobs:
        - name: dataset-initializer
          template:
            spec:
              template:
                spec:
                  containers:
                    - name: dataset-initializer
                      command: ["/bin/sh", "-c", "touch $MARKS/init-\$TRAINLET_NODE_RANK; sleep 3; echo fetched"]
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
---
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: held
spec:
  runtimeRef:
    name: init-then-node
  trainer:
    numNodes: 2
    command: ["/bin/sh", "-c", "echo \$TRAINLET_RANK >> $MARKS/node-starts; echo trained"]
YAML
"$CTL" apply -f "$WORK/held.yaml" >/dev/null
# Both initializers run: the coordinator holds both nodes' `node` ranks for 3 s more.
wait_for 15 test -e "$MARKS/init-0" -a -e "$MARKS/init-1" \
  || fail "the initializers never started: $("$CTL" describe trainjob held)"
[ ! -e "$MARKS/node-starts" ] || fail "a node rank started before the initializers completed"
kill -9 "$COORD_PID"
log "coordinator killed (pid $COORD_PID) while it held the node ranks"
restart_coordinator

"$CTL" wait trainjob/held --for=condition=Complete --timeout=30s \
  || fail "held did not complete after the restart: $("$CTL" describe trainjob held)"
grep -q "workers of attempt 1 that wait for their dependencies: making them again" \
  "$TRAINLET_HOME/logs/coordinator.log" || fail "the restarted coordinator did not rebuild what it held"
json=$("$CTL" get trainjobs held -o json)
python3 - "$json" "$MARKS/node-starts" <<'PY' || fail "after the restart: $("$CTL" describe trainjob held)"
import json, sys
job = json.loads(sys.argv[1])["jobs"][0]
assert len(job["attempts"]) == 1, f"the attempt restarted: {job['attempts']}"
starts = sorted(open(sys.argv[2]).read().split())
assert starts == ["0", "1"], f"node ranks started {starts}, not each once"
PY
log "the held node ranks started once each after the restart, in the first attempt"
echo "PASS step_release_restart_test"
