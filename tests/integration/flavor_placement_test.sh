#!/usr/bin/env bash
# A job admitted to a ResourceFlavor runs only on that flavor's nodes (issue 14): two agents with
# different labels, two flavors. ClusterQueue research takes cpu from flavor a100 first, then h100;
# the first job gets a100 and must run on node-2 (gpu=a100) although node-1 comes first by name;
# the second, with a100's quota used, gets h100 and runs on node-1. A third ClusterQueue's flavor
# has no nodes: its job says so (flavor and labels) instead of waiting silently. Then Kueue's
# resource-in-use finalizer: a100 and research, deleted while the jobs run, stay Terminating (a
# new job waits, saying research is terminating) and go once the jobs are done.
source "$(dirname "$0")/lib.sh"

start_cluster 2 --labels gpu=h100 --labels gpu=a100

cat > "$WORK/queues.yaml" <<'YAML'
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: a100}
spec: {nodeLabels: {gpu: a100}}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: h100}
spec: {nodeLabels: {gpu: h100}}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: tpu}
spec: {nodeLabels: {accel: tpu}}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: research}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: a100
      resources:
      - {name: cpu, nominalQuota: 100m}
    - name: h100
      resources:
      - {name: cpu, nominalQuota: 100m}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: tpus}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: tpu
      resources:
      - {name: cpu, nominalQuota: 1}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {namespace: default, name: lq}
spec: {clusterQueue: research}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {namespace: default, name: tpu-q}
spec: {clusterQueue: tpus}
YAML
"$CTL" apply -f "$WORK/queues.yaml" >/dev/null

# job NAME QUEUE: one node, 100m cpu, sleeps until $WORK/stop exists.
job() {
  cat <<YAML
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: $1
  labels: {kueue.x-k8s.io/queue-name: $2}
spec:
  runtimeRef: {name: plain}
  trainer:
    numNodes: 1
    resourcesPerNode: {requests: {cpu: 100m}}
    command: ["/bin/sh", "-c", "while [ ! -e $WORK/stop ]; do sleep 0.1; done"]
YAML
}
{ job first lq; echo ---; job second lq; echo ---; job third tpu-q; } > "$WORK/jobs.yaml"
"$CTL" apply -f "$WORK/jobs.yaml" >/dev/null

field() { "$CTL" get trainjob "$1" -o json | python3 -c \
  'import json,sys; j=json.load(sys.stdin)["jobs"][0]; print(",".join(j.get(sys.argv[1], [])) if sys.argv[1] == "placement" else j.get(sys.argv[1], ""))' "$2"; }
placed() { [ -n "$(field "$1" placement)" ]; }
wait_for 20 placed first || fail "first was not placed: $(field first reason)"
wait_for 20 placed second || fail "second was not placed: $(field second reason)"
[ "$(field first placement)" = node-2 ] || fail "first (flavor a100) ran on $(field first placement)"
[ "$(field second placement)" = node-1 ] || fail "second (flavor h100) ran on $(field second placement)"
out=$("$CTL" describe trainjob first)
assert_contains "$out" "a100 (placed on its nodes only)" "describe shows the flavor"
assert_contains "$out" "flavor a100 (nodeLabels gpu=a100)" "the Admitted event names the labels"

has_reason() { case "$(field third message)" in *"$1"*) return 0 ;; esac; return 1; }
wait_for 20 has_reason "ResourceFlavor tpu's nodeLabels accel=tpu" ||
  fail "third does not say why it waits: $(field third reason)"
placed third && fail "third (flavor tpu, no nodes) was placed"
log "each job ran on its flavor's nodes; a flavor without nodes said so"

# Kueue's resource-in-use finalizer: a100 is named by research and used by first, research holds
# first's and second's quota. Deleted now, both stay, Terminating, until their last user is gone.
out=$("$CTL" delete resourceflavor a100 2>&1)
assert_contains "$out" "resourceflavor/a100 deleted" "delete answers at once, as kubectl"
assert_contains "$out" "is in use (ClusterQueue research, TrainJob first)" "delete says what uses it"
out=$("$CTL" delete clusterqueue research 2>&1)
assert_contains "$out" "is in use (TrainJob first, TrainJob second)" "the ClusterQueue's users"
assert_contains "$("$CTL" get resourceflavors)" "Terminating" "get rf shows it Terminating"
assert_contains "$("$CTL" get clusterqueues)" "Terminating" "get cq shows it Terminating"
"$CTL" get rf a100 -o json | python3 -c '
import json, sys
o = json.load(sys.stdin)["objects"][0]
assert o.get("deletionTimestamp", "").endswith("Z"), o
assert o.get("finalizers") == ["kueue.x-k8s.io/resource-in-use"], o
assert o.get("inUseBy") == ["ClusterQueue research", "TrainJob first"], o' ||
  fail "get rf a100 -o json lacks deletionTimestamp, finalizers or inUseBy"
assert_contains "$("$CTL" describe rf a100)" "In use by:     ClusterQueue research, TrainJob first" \
  "describe rf says what uses it"
{ job fourth lq; } > "$WORK/fourth.yaml"
"$CTL" apply -f "$WORK/fourth.yaml" >/dev/null
waits() { "$CTL" get trainjob fourth -o json | python3 -c '
import json, sys
w = json.load(sys.stdin)["jobs"][0].get("queueWait", {})
sys.exit(0 if sys.argv[1] in w.get("message", "") else 1)' "$1"; }
wait_for 20 waits "ClusterQueue research is terminating" ||
  fail "fourth does not say research is terminating: $("$CTL" describe trainjob fourth)"
placed fourth && fail "fourth was admitted by a Terminating ClusterQueue"

# first and second finish: research goes, and a100 with it (research was its last user).
touch "$WORK/stop"
gone() { ! "$CTL" get "$1" "$2" >/dev/null 2>&1; }
wait_for 30 gone clusterqueue research || fail "research still there: $("$CTL" get cq 2>&1)"
wait_for 10 gone resourceflavor a100 || fail "a100 still there: $("$CTL" get rf 2>&1)"
out=$("$CTL" get rf a100 2>&1 || true)
assert_contains "$out" "ResourceFlavor/a100 not found" "a100 is gone"
"$CTL" get rf h100 >/dev/null || fail "h100, never deleted, is gone"
wait_for 20 waits "ClusterQueue research not found" ||
  fail "fourth does not say research is gone: $("$CTL" describe trainjob fourth)"
log "a flavor and a ClusterQueue in use stayed Terminating, and went with their last job"
echo "PASS flavor_placement_test"
