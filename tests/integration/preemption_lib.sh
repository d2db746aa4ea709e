# Helpers for tests of what happens to a preempted (or drained, or deadline-bound) job's ranks:
# a job whose rank (workers/checkpoint_rank.py) checkpoints on the warning signal and resumes
# from its checkpoint, and readers of what that rank noted. Source after lib.sh. Reusable by the
# end-to-end "preempted by a higher-priority job" test once admission preempts.

CHECKPOINT_RANK="$TRAINLET_SOURCE_DIR/tests/integration/workers/checkpoint_rank.py"

# checkpoint_job NAME [SPEC-LINES [ANNOTATION-LINES [RANK-ENV-LINES]]] -> path of a 1-node,
# 1-rank TrainJob file (3 restarts allowed) whose rank is checkpoint_rank.py with
# CKPT_DIR=$WORK/ckpt-NAME (created).
# SPEC-LINES go under spec ("  activeDeadlineSeconds: 6"), ANNOTATION-LINES under
# metadata.annotations ("    trainlet.io/preemption-grace-seconds: \"5\""), RANK-ENV-LINES are
# more env entries ("      - name: CKPT_STAY\n        value: \"1\"").
checkpoint_job() {
  local name=$1 spec=${2:-} annotations=${3:-} env=${4:-} file="$WORK/$1.yaml"
  mkdir -p "$WORK/ckpt-$name"
  {
    printf 'apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata:\n  name: %s\n' "$name"
    printf '  annotations:\n    trainlet.io/max-restarts: "3"\n'
    [ -n "$annotations" ] && printf '%s\n' "$annotations"
    printf 'spec:\n'
    [ -n "$spec" ] && printf '%s\n' "$spec"
    printf '  runtimeRef:\n    name: plain\n  trainer:\n'
    printf '    numNodes: 1\n    numProcPerNode: 1\n'
    printf '    command: ["python3", "%s"]\n' "$CHECKPOINT_RANK"
    printf '    env:\n      - name: CKPT_DIR\n        value: "%s"\n' "$WORK/ckpt-$name"
    [ -n "$env" ] && printf '%b\n' "$env"
  } > "$file"
  echo "$file"
}

# ckpt_dir NAME: where the job's rank keeps its checkpoint and notes.
ckpt_dir() { echo "$WORK/ckpt-$1"; }
# ckpt_progress NAME: the step the rank is at (0 before it started).
ckpt_progress() { cat "$(ckpt_dir "$1")/progress" 2>/dev/null || echo 0; }
# ckpt_step NAME: the step of the last checkpoint ("" when none).
ckpt_step() { cat "$(ckpt_dir "$1")/ckpt" 2>/dev/null || true; }
# ckpt_events NAME [WORD]: the rank's notes (those starting with WORD after the time).
ckpt_events() {
  local f
  f="$(ckpt_dir "$1")/events"
  if [ -n "${2:-}" ]; then awk -v w="$2" '$2 == w' "$f" 2>/dev/null || true; else cat "$f" 2>/dev/null || true; fi
}
# ckpt_progress_at_least NAME N: true once the rank has counted N steps.
ckpt_progress_at_least() { [ "$(ckpt_progress "$1")" -ge "$2" ]; }
# ckpt_has NAME WORD: true once the rank noted WORD (usr1, term, start).
ckpt_has() { [ -n "$(ckpt_events "$1" "$2")" ]; }
# ckpt_time NAME WORD [N]: the time (ms since the epoch) of the Nth (default last) note WORD.
ckpt_time() {
  local lines
  lines=$(ckpt_events "$1" "$2")
  if [ -n "${3:-}" ]; then echo "$lines" | sed -n "${3}p" | awk '{print $1}'
  else echo "$lines" | tail -n 1 | awk '{print $1}'; fi
}
now_ms() { python3 -c 'import time; print(int(time.time() * 1000))'; }

# preemption_queues: one ClusterQueue `research` holding 1 cpu that preempts LowerPriority, its
# LocalQueue default/lq, and WorkloadPriorityClasses low (10) and high (1000), applied.
preemption_queues() {
  cat > "$WORK/queues.yaml" <<'EOF'
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata:
  name: default-flavor
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata:
  name: research
spec:
  namespaceSelector: {}
  preemption:
    withinClusterQueue: LowerPriority
  resourceGroups:
  - coveredResources: ["cpu"]
    flavors:
    - name: default-flavor
      resources:
      - name: cpu
        nominalQuota: "1"
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata:
  namespace: default
  name: lq
spec:
  clusterQueue: research
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: WorkloadPriorityClass
metadata:
  name: low
value: 10
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: WorkloadPriorityClass
metadata:
  name: high
value: 1000
EOF
  "$CTL" apply -f "$WORK/queues.yaml" >/dev/null
}

# queued FILE PRIORITY: the job file, labelled for lq with PRIORITY, asking the whole quota.
queued() {
  sed -i "s|^  annotations:|  labels:\n    kueue.x-k8s.io/queue-name: lq\n    kueue.x-k8s.io/priority-class: $2\n  annotations:|" "$1"
  sed -i "s|^    numProcPerNode: 1|    numProcPerNode: 1\n    resourcesPerNode:\n      requests:\n        cpu: \"1\"|" "$1"
}
