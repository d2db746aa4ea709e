#!/usr/bin/env bash
# The jax plugin's env contract, end to end: a test worker in each process reads
# JAX_COORDINATOR_ADDRESS/JAX_NUM_PROCESSES/JAX_PROCESS_ID; process 0 listens on the coordinator
# address, the others connect to it, and all of them exchange their ids. (XGBoost, which shared
# this test's contract worker, runs for real in xgboost_test.sh.)
source "$(dirname "$0")/lib.sh"
worker="$TRAINLET_SOURCE_DIR/tests/integration/workers/coordinator_worker.py"

start_cluster 2 --slots 2
log "cluster up"

# contract_job NAME RUNTIME PROCS MODE: 2 nodes x PROCS of the worker on RUNTIME.
contract_job() {
  local file="$WORK/$1.yaml"
  {
    printf 'apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata:\n  name: %s\n' "$1"
    printf 'spec:\n  runtimeRef:\n    name: %s\n  trainer:\n    numNodes: 2\n' "$2"
    [ "$3" = 1 ] || printf '    numProcPerNode: %s\n' "$3"
    printf '    command: [python3, "%s", "%s"]\n' "$worker" "$4"
  } > "$file"
  echo "$file"
}

check_ids() {  # check_ids JOB MODE N
  local out i
  out=$("$CTL" logs "$1")
  for i in $(seq 0 $(( $3 - 1 ))); do
    grep -q "$2 $i of $3 on .*: ids 0\.\.$(( $3 - 1 )) OK" <<<"$out" || fail "$1: process $i: $out"
  done
}

# JAX: one process per node, as Kubeflow runs it.
"$CTL" apply -f "$(contract_job jaxjob jax-distributed 1 jax)" >/dev/null
"$CTL" wait trainjob/jaxjob --for=condition=Complete --timeout=60s \
  || fail "jaxjob: $("$CTL" describe trainjob jaxjob) $("$CTL" logs jaxjob)"
check_ids jaxjob jax 2
assert_contains "$("$CTL" describe trainjob jaxjob)" "JAX_COORDINATOR_ADDRESS" "jax launch mode"
log "jax: 2 processes found the coordinator"

echo "PASS jax_test"
