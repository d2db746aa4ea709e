#!/usr/bin/env bash
# PaddleJob and JAXJob (kubeflow.org/v1) on simulated hosts (network namespaces, or 127.0.0.x
# aliases), with contract workers: each replica checks the env the Training Operator injects, to
# the letter (PADDLE_MASTER, PADDLE_NNODES, PADDLE_JOB_ID, POD_IP_DUMMY, PADDLE_SERVER_NUM /
# PADDLE_TRAINER_NUM; COORDINATOR_ADDRESS, COORDINATOR_PORT, NUM_PROCESSES, PROCESS_ID), against
# its own replica and node, and meets the others at the rendezvous endpoint the env names
# (tests/integration/workers/v1_contract_worker.py). A replica that finds a mismatch names it and
# fails the job.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/netns_lib.sh"
worker="$TRAINLET_SOURCE_DIR/tests/integration/workers/v1_contract_worker.py"

start_netns_cluster 3
log "cluster up in $NETNS_MODE mode"
# Each node's advertised address, for the workers to know their own.
printf '{"node-1": "%s", "node-2": "%s", "node-3": "%s"}\n' "${NETNS_HOSTS[@]}" > "$WORK/nodes.json"

# v1_job KIND NAME SPECS_KEY CONTAINER MODE LAYOUT: a job of LAYOUT's replicas ("Master:1,Worker:2"),
# each running the contract worker.
v1_job() {
  local kind=$1 name=$2 key=$3 container=$4 mode=$5 layout=$6 part type count
  {
    printf 'apiVersion: kubeflow.org/v1\nkind: %s\nmetadata:\n  name: %s\nspec:\n  %s:\n' "$kind" "$name" "$key"
    IFS=, read -ra part <<<"$layout"
    for p in "${part[@]}"; do
      type=${p%%:*} count=${p##*:}
      printf '    %s:\n      replicas: %s\n      restartPolicy: Never\n' "$type" "$count"
      printf '      template:\n        spec:\n          containers:\n          - name: %s\n' "$container"
      printf '            image: docker.io/example/unused:latest\n'
      printf '            command: [/usr/bin/python3, "%s", %s, %s, "%s", "%s"]\n' \
        "$worker" "$mode" "$name" "$layout" "$WORK/nodes.json"
    done
  } > "$WORK/$name.yaml"
  echo "$WORK/$name.yaml"
}

# run_v1_job FILE NAME MODE LAYOUT: applies, waits for Complete, and checks each replica said OK.
run_v1_job() {
  local file=$1 name=$2 mode=$3 layout=$4 out p type count i
  "$CTL" apply -f "$file" >/dev/null || fail "apply of $name"
  "$CTL" wait "trainjob/$name" --for=condition=Complete --timeout=60s \
    || fail "$name did not complete: $("$CTL" describe trainjob "$name") $("$CTL" logs "$name")"
  out=$("$CTL" logs "$name")
  IFS=, read -ra part <<<"$layout"
  for p in "${part[@]}"; do
    type=${p%%:*} count=${p##*:}
    for i in $(seq 0 $((count - 1))); do
      assert_contains "$out" "$mode $type $i: env OK" "$name's replica $type $i"
    done
  done
}

# 1. PaddleJob, collective mode (Workers only): Worker 0 is the endpoint.
run_v1_job "$(v1_job PaddleJob paddle-coll paddleReplicaSpecs paddle paddle Worker:3)" paddle-coll paddle Worker:3
log "PaddleJob collective: 3 Workers, Worker 0 the endpoint"
# 2. PaddleJob, PS mode (a Master): Master 0 is the endpoint; SERVER_NUM / TRAINER_NUM.
run_v1_job "$(v1_job PaddleJob paddle-ps paddleReplicaSpecs paddle paddle Master:1,Worker:2)" paddle-ps paddle Master:1,Worker:2
assert_contains "$("$CTL" get paddlejobs)" "paddle-ps" "get paddlejobs"
log "PaddleJob PS mode: Master + 2 Workers"
# 3. JAXJob: 3 Workers, Worker 0 the coordinator.
run_v1_job "$(v1_job JAXJob jax3 jaxReplicaSpecs jax jax Worker:3)" jax3 jax Worker:3
assert_contains "$("$CTL" get jaxjobs)" "jax3" "get jaxjobs"
log "JAXJob: 3 Workers, Worker 0 the coordinator"

# 4. The check can fail: the same job with each replica told there are 2 (the job has 3) names
# the mismatch and fails the job.
file=$(v1_job JAXJob jaxbad jaxReplicaSpecs jax jax Worker:3)
sed -i 's/"Worker:3"/"Worker:2"/' "$file"
"$CTL" apply -f "$file" >/dev/null || fail "apply of jaxbad"
wait_for 60 sh -c "'$CTL' get trainjob jaxbad | grep -q Failed" \
  || fail "jaxbad did not fail: $("$CTL" describe trainjob jaxbad)"
assert_contains "$("$CTL" logs jaxbad)" "MISMATCH NUM_PROCESSES: got '3', want '2'" "the named mismatch"
log "a wrong expectation is named and fails the job"
echo "PASS v1_paddle_jax_test"
