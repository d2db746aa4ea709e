#!/usr/bin/env bash
# Placement: resources, nodeSelector, taints and tolerations, zone packing and Pending reasons;
# node health (a failing health check program); cordon, uncordon and drain.
source "$(dirname "$0")/lib.sh"

ZONE=topology.kubernetes.io/zone
# The health check fails on a node while $WORK/unhealthy-<node> exists.
HEALTH="$WORK/health.sh"
cat > "$HEALTH" <<EOF
#!/bin/sh
if [ -e "$WORK/unhealthy-\$TRAINLET_NODE" ]; then echo "ECC errors on GPU 3"; exit 1; fi
exit 0
EOF
chmod +x "$HEALTH"

# node-1, node-2: 8-GPU servers for training, in zones a and b. node-3: CPU box in zone a,
# tainted for inference. node-4: a laptop in zone b.
start_cluster 4 --slots 4 \
  --topology "$FIXTURES/dgx-2socket-8gpu.xml" --topology "$FIXTURES/dgx-2socket-8gpu.xml" \
  --topology "$FIXTURES/cpu-2socket.xml" --topology "$FIXTURES/laptop-1socket.xml" \
  --labels "$ZONE=a,node-type=training" --labels "$ZONE=b,node-type=training" \
  --labels "$ZONE=a" --labels "$ZONE=b" \
  --taints - --taints - --taints dedicated=infer:NoSchedule --taints - \
  --health-check "$HEALTH" --health-interval-ms 200

# job NAME NODES SCRIPT [resources-yaml] [pod-spec-yaml]: a TrainJob and its own runtime, whose
# node pod spec gets the given nodeSelector/tolerations lines.
job() {
  local name=$1 nodes=$2 script=$3 resources=${4:-} podspec=${5:-} file="$WORK/$1.yaml"
  {
    printf 'apiVersion: trainer.kubeflow.org/v1alpha1\nkind: ClusterTrainingRuntime\n'
    printf 'metadata:\n  name: rt-%s\nspec:\n  template:\n    spec:\n' "$name"
    printf '      failurePolicy:\n        maxRestarts: 2\n'
    printf '      replicatedJobs:\n        - name: node\n          template:\n            spec:\n'
    printf '              template:\n                spec:\n'
    [ -n "$podspec" ] && printf '%s\n' "$podspec" | sed 's/^/                  /'
    printf '                  containers:\n                    - name: node\n'
    printf '                      command: ["/bin/true"]\n'
    printf -- '---\napiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\n'
    printf 'metadata:\n  name: %s\nspec:\n  runtimeRef:\n    name: rt-%s\n  trainer:\n' "$name" "$name"
    printf '    numNodes: %s\n    numProcPerNode: 1\n' "$nodes"
    [ -n "$resources" ] && printf '    resourcesPerNode:\n      requests:\n%s\n' "$resources"
    printf '    command: ["/bin/sh", "-c", "%s"]\n' "$script"
  } > "$file"
  "$CTL" apply -f "$file" >/dev/null
}

placement() { "$CTL" get trainjob "$1" -o json | python3 -c \
  'import json,sys; print(",".join(json.load(sys.stdin)["jobs"][0].get("placement", [])))'; }
phase() { "$CTL" get trainjob "$1" -o json | python3 -c \
  'import json,sys; print(json.load(sys.stdin)["jobs"][0]["phase"])'; }
reason() { "$CTL" get trainjob "$1" -o json | python3 -c \
  'import json,sys; j=json.load(sys.stdin)["jobs"][0]; print(j.get("reason", ""), j.get("message", ""))'; }
attempt() { "$CTL" get trainjob "$1" -o json | python3 -c \
  'import json,sys; print(json.load(sys.stdin)["jobs"][0].get("attempt", 0))'; }
is_phase() { [ "$(phase "$1")" = "$2" ]; }
has_reason() { case "$(reason "$1")" in *"$2"*) return 0 ;; esac; return 1; }
gone() { ! "$CTL" get trainjob "$1" >/dev/null 2>&1; }
remove() { "$CTL" delete trainjob "$1" --timeout 30s >/dev/null; wait_for 30 gone "$1"; }

log "resources and nodeSelector: 8 GPUs on each of 2 training nodes"
job gpu 2 "sleep 30" '        nvidia.com/gpu: "8"
        memory: 16Gi' 'nodeSelector:
  node-type: training'
wait_for 30 is_phase gpu Running || fail "gpu job: $(phase gpu) $(reason gpu)"
[ "$(placement gpu)" = "node-1,node-2" ] || fail "gpu job placed on $(placement gpu)"

log "Pending reason when the GPUs are taken"
job gpu2 1 "true" '        nvidia.com/gpu: "1"'
wait_for 15 has_reason gpu2 "0 of them have nvidia.com/gpu: 1 free" ||
  fail "gpu2 reason: $(reason gpu2)"
is_phase gpu2 Pending || fail "gpu2 should be Pending, is $(phase gpu2)"
remove gpu
wait_for 30 is_phase gpu2 Succeeded || fail "gpu2 should run once the GPUs are free: $(reason gpu2)"
remove gpu2

log "Pending reason when nothing fits: 3 nodes with 8 GPUs"
job big 3 "true" '        nvidia.com/gpu: "8"'
wait_for 15 has_reason big "needs 3 nodes with 1 free slot, nvidia.com/gpu: 8 each" ||
  fail "big reason: $(reason big)"
assert_contains "$(reason big)" "2 of them have nvidia.com/gpu: 8 free" "big's reason"
remove big

log "zone packing: a 2-node CPU job stays in one zone, off the GPU nodes where it can"
job zone 2 "sleep 30"
wait_for 30 is_phase zone Running || fail "zone job: $(phase zone) $(reason zone)"
# Zone a offers node-1 only (node-3 is tainted), zone b offers node-2 and node-4.
[ "$(placement zone)" = "node-2,node-4" ] || fail "zone job placed on $(placement zone)"
remove zone

log "taints: node-3 needs a toleration"
job taint 1 "true" "" 'nodeSelector:
  kubernetes.io/hostname: node-3'
wait_for 15 has_reason taint "0 of them tolerate their taints" || fail "taint reason: $(reason taint)"
remove taint
job tolerate 1 "true" "" 'nodeSelector:
  kubernetes.io/hostname: node-3
tolerations:
  - key: dedicated
    operator: Equal
    value: infer
    effect: NoSchedule'
wait_for 30 is_phase tolerate Succeeded || fail "tolerate: $(phase tolerate) $(reason tolerate)"
remove tolerate

log "health: a failing health check makes node-4 NotReady and keeps new ranks off it"
touch "$WORK/unhealthy-node-4"
node4_not_ready() { "$CTL" get nodes | grep -Eq '^node-4 +NotReady'; }
wait_for 15 node4_not_ready || fail "node-4 should be NotReady: $("$CTL" get nodes)"
assert_contains "$("$CTL" get nodes node-4 -o json)" "ECC errors on GPU 3" "health reason"
job sick 1 "true" "" 'nodeSelector:
  kubernetes.io/hostname: node-4'
wait_for 15 has_reason sick "1 Ready node is unhealthy" || fail "sick reason: $(reason sick)"
sleep 1
is_phase sick Pending || fail "sick should stay Pending, is $(phase sick)"
rm "$WORK/unhealthy-node-4"
wait_for 30 is_phase sick Succeeded || fail "sick should run once node-4 is healthy: $(reason sick)"
remove sick

log "cordon keeps new jobs off; uncordon lets them on"
"$CTL" cordon node-4 --reason "disk swap" | grep -q "node/node-4 cordoned" || fail "cordon output"
"$CTL" get nodes | grep -Eq '^node-4 +Ready,SchedulingDisabled' || fail "get nodes: $("$CTL" get nodes)"
"$CTL" cordon node-4 | grep -q "already cordoned" || fail "second cordon should say already"
job fenced 1 "true" "" 'nodeSelector:
  kubernetes.io/hostname: node-4'
wait_for 15 has_reason fenced "1 Ready node is cordoned" || fail "fenced reason: $(reason fenced)"
"$CTL" uncordon node-4 | grep -q "node/node-4 uncordoned" || fail "uncordon output"
wait_for 30 is_phase fenced Succeeded || fail "fenced should run after uncordon: $(reason fenced)"
remove fenced
if out=$("$CTL" cordon node-99 2>&1); then fail "cordon of an unknown node should fail: $out"; fi
assert_contains "$out" "node node-99 is not registered" "cordon of an unknown node"

log "drain waits for the node's ranks; --force moves the job"
job mover 1 "sleep 60" "" 'nodeSelector:
  node-type: training'
wait_for 30 is_phase mover Running || fail "mover: $(phase mover) $(reason mover)"
from=$(placement mover)
to=node-2; [ "$from" = node-2 ] && to=node-1
if "$CTL" drain "$from" --timeout 2s > "$WORK/drain.out" 2>&1; then
  fail "drain without --force should time out while mover runs: $(cat "$WORK/drain.out")"
fi
assert_contains "$(cat "$WORK/drain.out")" "still runs 1 ranks of mover" "drain timeout message"
"$CTL" get nodes | grep -Eq "^$from +Ready,SchedulingDisabled" || fail "drained node not cordoned"
"$CTL" drain "$from" --force --timeout 30s > "$WORK/drain.out" 2>&1 ||
  fail "drain --force: $(cat "$WORK/drain.out")"
assert_contains "$(cat "$WORK/drain.out")" "node/$from drained" "drain --force output"
moved() { [ "$(attempt mover)" = 2 ] && [ "$(placement mover)" = "$to" ] && is_phase mover Running; }
wait_for 30 moved || fail "mover should restart on $to: attempt $(attempt mover) on $(placement mover), $(phase mover)"
"$CTL" describe trainjob mover | grep -q "node drained" || fail "describe should give the cause"
"$CTL" uncordon "$from" >/dev/null
remove mover

echo "PASS placement_test"
