#!/usr/bin/env bash
# A job admitted to a ResourceFlavor runs only on that flavor's nodes (issue 14): two agents with
# different labels, two flavors. ClusterQueue research takes cpu from flavor a100 first, then h100;
# the first job gets a100 and must run on node-2 (gpu=a100) although node-1 comes first by name;
# the second, with a100's quota used, gets h100 and runs on node-1. A third ClusterQueue's flavor
# has no nodes: its job says so (flavor and labels) instead of waiting silently.
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

has_reason() { case "$(field third reason)" in *"$1"*) return 0 ;; esac; return 1; }
wait_for 20 has_reason "ResourceFlavor tpu's nodeLabels accel=tpu" ||
  fail "third does not say why it waits: $(field third reason)"
placed third && fail "third (flavor tpu, no nodes) was placed"
touch "$WORK/stop"
log "each job ran on its flavor's nodes; a flavor without nodes said so"
echo "PASS flavor_placement_test"
