#!/usr/bin/env bash
# Kubeflow's own runtimes and example TrainJobs, and the Training Operator's and mpi-operator's v1
# examples, are accepted unchanged through trainletctl; a copy with one field made invalid under
# the CRD schema is refused, naming the field's path.
source "$(dirname "$0")/lib.sh"
[ -d "$KUBEFLOW" ] || { echo "SKIP: $KUBEFLOW not present"; exit 77; }

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
# Kubeflow's torch, jax and xgboost runtimes each run on a trainlet plugin of that name. The
# 3-node multi-node-example cannot be placed on 2 nodes: stored, Pending, not for want of a plugin.
d=$("$CTL" describe trainjob multi-node-example)
assert_contains "$d" "Pending" "multi-node-example phase"
assert_contains "$d" "ClusterTrainingRuntime/torch-distributed (plugin torch)" "multi-node-example plugin"
case "$d" in *NoRuntimePlugin*) fail "torch-distributed has a plugin now: $d" ;; esac
assert_contains "$d" "image" "image reported as ignored"
for rt in jax xgboost; do
  printf 'apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata:\n  name: %s-job\nspec:\n  runtimeRef:\n    name: %s-distributed\n  trainer:\n    numNodes: 3\n    command: ["true"]\n' \
    "$rt" "$rt" > "$WORK/$rt.yaml"
  "$CTL" apply -f "$WORK/$rt.yaml" >/dev/null 2>&1 || fail "TrainJob on Kubeflow's $rt-distributed refused"
  d=$("$CTL" describe trainjob "$rt-job")
  assert_contains "$d" "ClusterTrainingRuntime/$rt-distributed (plugin $rt)" "$rt-distributed plugin"
  case "$d" in *NoRuntimePlugin*) fail "$rt-distributed has a plugin now: $d" ;; esac
done
# Kubeflow's mlx-distributed has mlPolicy.mpi: MLX over OpenMPI, on the mpi plugin.
printf 'apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata:\n  name: mlx-mpi-job\nspec:\n  runtimeRef:\n    name: mlx-distributed\n  trainer:\n    numNodes: 3\n    command: ["true"]\n' > "$WORK/mlx.yaml"
"$CTL" apply -f "$WORK/mlx.yaml" >/dev/null 2>&1 || fail "TrainJob on Kubeflow's mlx-distributed refused"
assert_contains "$("$CTL" describe trainjob mlx-mpi-job)" "(plugin mpi)" "mlx-distributed stays on mpi"
# The Training Operator's and mpi-operator's examples (tests/fixtures/kubeflow-v1/), unchanged:
# each is accepted, or refused only because it runs its image's entrypoint (trainlet runs a
# command, not an image), naming the field.
accepted=0 entrypoint=0
for f in "$FIXTURES"/kubeflow-v1/training-operator/*.yaml "$FIXTURES"/kubeflow-v1/mpi-operator/*.yaml; do
  if "$CTL" apply -f "$f" > "$WORK/out" 2> "$WORK/err"; then
    grep -q ": became TrainJob " "$WORK/out" "$WORK/err" || fail "$(basename "$f"): no conversion note: $(cat "$WORK/out" "$WORK/err")"
    accepted=$((accepted + 1))
    # Several examples share a name (mpi-operator's three "pi"s): each is removed once accepted.
    job=$(sed -n 's|^trainjob/\(.*\) created$|\1|p' "$WORK/out")
    case "$job" in
      */*) "$CTL" delete trainjob "${job#*/}" -n "${job%%/*}" --timeout 30s >/dev/null ;;
      ?*) "$CTL" delete trainjob "$job" --timeout 30s >/dev/null ;;
      *) fail "$(basename "$f"): apply created no trainjob: $(cat "$WORK/out")" ;;
    esac
  else
    grep -q '\.command: required on trainlet: it runs the command on the node' "$WORK/err" \
      || fail "$(basename "$f") refused: $(cat "$WORK/err")"
    entrypoint=$((entrypoint + 1))
  fi
done
[ "$accepted/$entrypoint" = 15/15 ] || fail "v1 examples: $accepted accepted, $entrypoint refused for their entrypoint (want 15/15)"
log "kubeflow-v1 examples: $accepted accepted unchanged, $entrypoint refused for running an image's entrypoint"
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
mutate "$FIXTURES/kubeflow-v1/training-operator/pytorch_simple.yaml" \
  '0,/replicas: 1/s/replicas: 1/replicas: "one"/' "spec.pytorchReplicaSpecs.Master.replicas"
mutate "$FIXTURES/kubeflow-v1/mpi-operator/pi_pi.yaml" 's/slotsPerWorker: 1/slotsPerWorker: "x"/' \
  "spec.slotsPerWorker"
after=$("$CTL" get trainjobs -o name | wc -l)
[ "$before" = "$after" ] || fail "a refused file stored something ($before -> $after jobs)"
echo "PASS conformance_test"
