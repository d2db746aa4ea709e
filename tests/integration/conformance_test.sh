#!/usr/bin/env bash
# Kubeflow's own runtimes and example TrainJobs are accepted unchanged through trainletctl; a copy
# with one field made invalid under the CRD schema is refused, naming the field's path.
source "$(dirname "$0")/lib.sh"
[ -d "$KUBEFLOW" ] || { echo "SKIP: $KUBEFLOW not present"; exit 0; }

start_cluster 2 --slots 2
for f in "$KUBEFLOW"/runtimes/*.yaml "$KUBEFLOW"/examples/*.yaml; do
  if ! "$CTL" apply -f "$f" > "$WORK/out" 2> "$WORK/err"; then
    fail "$(basename "$f") refused: $(cat "$WORK/err")"
  fi
  log "$(basename "$f"): $(tr '\n' ' ' < "$WORK/out") ($(grep -c '^Warning' "$WORK/err" || true) warnings)"
done
# Re-applying is idempotent.
"$CTL" apply -f "$KUBEFLOW/examples/01-multi-node.yaml" | grep -q "trainjob/multi-node-example unchanged" \
  || fail "re-apply must say unchanged"
# Runtime patches are reported as ignored.
"$CTL" apply -f "$KUBEFLOW/examples/02-runtime-patches.yaml" 2> "$WORK/err" >/dev/null
jobs=$("$CTL" get trainjobs -o json)
for name in multi-node-example runtime-patches-example multi-step-example; do
  assert_contains "$jobs" "\"name\": \"$name\"" "stored job $name"
done
# Their runtime plugin (torch) is not in this build yet: stored, Pending, with a clear reason.
d=$("$CTL" describe trainjob multi-node-example)
assert_contains "$d" "Pending" "multi-node-example phase"
assert_contains "$d" "NoRuntimePlugin" "multi-node-example reason"
assert_contains "$d" "image" "image reported as ignored"
before=$("$CTL" get trainjobs -o name | wc -l)

# Mutations: one field wrong under the schema each; the error names its path.
mutate() {  # mutate FILE SED-EXPR EXPECTED-PATH
  sed "$2" "$1" > "$WORK/mutated.yaml"
  cmp -s "$1" "$WORK/mutated.yaml" && fail "mutation '$2' changed nothing in $(basename "$1")"
  if "$CTL" apply -f "$WORK/mutated.yaml" 2> "$WORK/err" >/dev/null; then
    fail "mutated $(basename "$1") ($2) was accepted"
  fi
  assert_contains "$(cat "$WORK/err")" "$3" "error for $2"
  log "refused $(basename "$1") with '$2': $(head -c 200 "$WORK/err")"
}
mutate "$KUBEFLOW/examples/01-multi-node.yaml" 's/numNodes: 3/numNodes: "three"/' "spec.trainer.numNodes"
mutate "$KUBEFLOW/examples/01-multi-node.yaml" 's/numNodes: 3/numNodes: -1/' "spec.trainer.numNodes"
mutate "$KUBEFLOW/runtimes/mlx_distributed.yaml" 's/mpiImplementation: OpenMPI/mpiImplementation: LAM/' \
  "spec.mlPolicy.mpi.mpiImplementation"
mutate "$KUBEFLOW/examples/02-runtime-patches.yaml" 's/- name: CUSTOM_VAR/- value2: x/' "spec.trainer.env[0].name"
after=$("$CTL" get trainjobs -o name | wc -l)
[ "$before" = "$after" ] || fail "a refused file stored something ($before -> $after jobs)"
echo "PASS conformance_test"
