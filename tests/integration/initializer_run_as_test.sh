#!/usr/bin/env bash
# The node cache with a real initializer and ranks that are not root (issues 18 and 19): a job
# whose containers set securityContext.runAsUser: 65534 runs trainlet's built-in
# dataset-initializer on a file:// source. Its cache entry lands under cache/uid-65534 (owned by
# 65534, mode 0700; the cache dir itself searchable, not listable), never in root's part of the
# cache, and the ranks, as 65534, read the files at /workspace/dataset (or TRAINLET_DATASET_DIR,
# where the workspace could not be mounted). A second job of the same URI is a cache hit. Needs
# root: it exits 77 (skipped) otherwise.
source "$(dirname "$0")/lib.sh"

if [ "$(id -u)" != 0 ]; then
  echo "SKIP: runAsUser needs root (this test switches ranks to uid 65534)"
  exit 77
fi
U=65534

start_cluster 1 --slots 2
chmod o+x "$WORK" "$TRAINLET_HOME" "$TRAINLET_HOME/agents"  # uid 65534 reaches its work dir
mkdir -p "$WORK/dataset/split"
echo alpha > "$WORK/dataset/train.jsonl"
echo beta > "$WORK/dataset/split/eval.jsonl"
chmod -R o+rX "$WORK/dataset"

# job NAME: a runtime whose dataset-initializer and node containers both run as uid 65534, and
# its TrainJob reading the dataset from file://$WORK/dataset.
job() {
  local name=$1 file="$WORK/$1.yaml"
  cat > "$file" <<YAML
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainingRuntime
metadata:
  name: rt-$name
spec:
  mlPolicy:
    numNodes: 1
  template:
    spec:
      replicatedJobs:
        - name: dataset-initializer
          replicas: 1
          template:
            spec:
              template:
                spec:
                  containers:
                    - name: dataset-initializer
                      image: ghcr.io/kubeflow/trainer/dataset-initializer
                      securityContext: {runAsUser: $U}
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
                      image: busybox
                      securityContext: {runAsUser: $U}
---
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: $name
spec:
  runtimeRef:
    kind: TrainingRuntime
    name: rt-$name
  initializer:
    dataset:
      storageUri: file://$WORK/dataset
  trainer:
    numNodes: 1
    command:
      - /bin/sh
      - -c
      - |
        d=/workspace/dataset; [ -r \$d/train.jsonl ] || d=\$TRAINLET_DATASET_DIR
        echo "uid=\$(id -u) dataset=\$(cat \$d/train.jsonl)+\$(cat \$d/split/eval.jsonl)"
YAML
  "$CTL" apply -f "$file" --wait --timeout 90s > "$WORK/$name.out" 2>&1 \
    || fail "$name did not complete: $(cat "$WORK/$name.out"; "$CTL" describe trainjob "$name"; "$CTL" logs "$name" --step dataset-initializer 2>&1)"
}

job first
out=$("$CTL" logs first)
assert_contains "$out" "uid=$U dataset=alpha+beta" "the rank's view of the dataset"
init=$("$CTL" logs first --step dataset-initializer)
assert_contains "$init" "cache miss" "the first fetch of the URI"
CACHE="$TRAINLET_HOME/agents/node-1/cache"
MINE="$CACHE/uid-$U"
[ -d "$MINE" ] || fail "no $MINE: $(ls -la "$CACHE" 2>&1)"
[ "$(stat -c '%u %a' "$MINE")" = "$U 700" ] || fail "$MINE is $(stat -c '%u %a' "$MINE"), not '$U 700'"
[ "$(stat -c '%a' "$CACHE")" = 711 ] || fail "$CACHE is $(stat -c '%a' "$CACHE"), not 711"
entries=$(find "$MINE/entries" -mindepth 2 -maxdepth 2 -name manifest.json 2>/dev/null | wc -l)
[ "$entries" = 1 ] || fail "want one cache entry in $MINE/entries, found $entries: $(ls -laR "$MINE")"
bad=$(find "$MINE" ! -user "$U" | head -3)
[ -z "$bad" ] || fail "cache files not owned by $U: $bad"
others=$(find "$CACHE" -mindepth 1 -maxdepth 1 ! -name "uid-$U" ! -name '.*' | head -3)
[ -z "$others" ] || fail "the run_as job's cache went elsewhere too: $others"
log "the initializer ran as $U and cached under $MINE (0700, its own); the rank read the dataset"

job second
assert_contains "$("$CTL" logs second --step dataset-initializer)" "cache hit" "the second job of the URI"
assert_contains "$("$CTL" logs second)" "uid=$U dataset=alpha+beta" "the second job's rank"
log "a second job of the URI as $U is served from its cache"
echo "PASS initializer_run_as_test"
