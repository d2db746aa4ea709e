#!/usr/bin/env bash
# XGBoost for real (Debian's python3-xgboost 1.7, rabit): distributed training on 2 simulated
# hosts (network namespaces, or 127.0.0.x aliases) where rank 0 hosts the tracker, as Kubeflow's
# xgboost-distributed runtime expects, (a) as a TrainJob on xgboost-distributed (rabit reads
# trainlet's DMLC_TRACKER_URI/DMLC_TRACKER_PORT/DMLC_TASK_ID itself; 2 workers per node) and
# (b) as a kubeflow.org/v1 XGBoostJob, Master + Worker (the operator's MASTER_ADDR/MASTER_PORT/
# RANK/WORLD_SIZE). Each worker trains on its own rows of one dataset and saves its model in its
# work dir: every worker must end with the same model, which it can only do if the histograms
# were allreduced through the tracker (tests/integration/workers/xgboost_train.py). Also: a
# TrainJob that sets a DMLC_* variable the runtime owns is refused at apply.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/netns_lib.sh"
/usr/bin/python3 -c 'import xgboost' 2>/dev/null \
  || fail "Debian's python3-xgboost is not installed (apt-get install python3-xgboost)"
train="$TRAINLET_SOURCE_DIR/tests/integration/workers/xgboost_train.py"

start_netns_cluster 2
log "cluster up in $NETNS_MODE mode"

# same_models JOB N: the N workers of JOB logged one model hash, and saved the same bytes.
same_models() {
  local job=$1 n=$2 out hashes files f
  out=$("$CTL" logs "$job")
  for r in $(seq 0 $((n - 1))); do
    assert_contains "$out" "xgboost rank $r of $n: trained 5 rounds" "$job's rank $r"
  done
  hashes=$(grep -o 'model sha256 [0-9a-f]*' <<<"$out" | sort -u)
  [ "$(grep -c . <<<"$hashes")" = 1 ] || fail "$job: the workers' models differ: $out"
  # Each worker's rows alone give another model: the shared one came through the allreduce.
  [ "$(grep -c 'alone sha256 ' <<<"$out")" = "$n" ] || fail "$job: not every worker trained alone: $out"
  grep -q "alone sha256 ${hashes#model sha256 }" <<<"$out" \
    && fail "$job: a worker's rows alone gave the shared model: $out"
  mapfile -t files < <(find "$TRAINLET_HOME" -path "*/work/$job/xgboost-model-*.json" | sort)
  [ "${#files[@]}" = "$n" ] || fail "$job: expected $n saved models, found: ${files[*]:-none}"
  for f in "${files[@]}"; do
    cmp -s "${files[0]}" "$f" || fail "$job: $f differs from ${files[0]}"
    [ "sha256 $(sha256sum < "$f" | cut -d' ' -f1)" = "${hashes#model }" ] \
      || fail "$job: $f is not the model its worker logged"
  done
  # The nodes' work dirs are their own: the models came from both hosts.
  [ "$(printf '%s\n' "${files[@]}" | sed 's|/work/.*||' | sort -u | wc -l)" = 2 ] \
    || fail "$job: the models were not saved on both nodes: ${files[*]}"
}

# 1. A TrainJob on Kubeflow's xgboost-distributed: 2 nodes x 2 workers, task 0 the tracker.
cat > "$WORK/xgb.yaml" <<YAML
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: xgb
spec:
  runtimeRef:
    name: xgboost-distributed
  trainer:
    numNodes: 2
    numProcPerNode: 2
    command: [/usr/bin/python3, "$train", dmlc]
YAML
"$CTL" apply -f "$WORK/xgb.yaml" >/dev/null || fail "apply of the xgboost TrainJob"
"$CTL" wait trainjob/xgb --for=condition=Complete --timeout=90s \
  || fail "xgb did not complete: $("$CTL" describe trainjob xgb) $("$CTL" logs xgb)"
same_models xgb 4
log "xgboost-distributed: 4 workers on 2 nodes trained the same model"

# 2. An XGBoostJob, Master + Worker, as the Training Operator runs it.
cat > "$WORK/xgbjob.yaml" <<YAML
apiVersion: kubeflow.org/v1
kind: XGBoostJob
metadata:
  name: xgbjob
spec:
  xgbReplicaSpecs:
    Master:
      replicas: 1
      restartPolicy: Never
      template:
        spec:
          containers:
          - name: xgboost
            image: docker.io/kubeflow/xgboost-dist-iris:latest
            ports:
            - containerPort: 9991
              name: xgboostjob-port
            command: [/usr/bin/python3, "$train", xgboostjob]
    Worker:
      replicas: 1
      restartPolicy: Never
      template:
        spec:
          containers:
          - name: xgboost
            image: docker.io/kubeflow/xgboost-dist-iris:latest
            ports:
            - containerPort: 9991
              name: xgboostjob-port
            command: [/usr/bin/python3, "$train", xgboostjob]
YAML
out=$("$CTL" apply -f "$WORK/xgbjob.yaml" 2>&1) || fail "apply of an XGBoostJob: $out"
assert_contains "$out" "XGBoostJob/xgbjob: became TrainJob xgbjob" "apply's notes"
"$CTL" wait trainjob/xgbjob --for=condition=Complete --timeout=90s \
  || fail "xgbjob did not complete: $("$CTL" describe trainjob xgbjob) $("$CTL" logs xgbjob)"
same_models xgbjob 2
assert_contains "$("$CTL" get xgboostjobs)" "xgbjob" "get xgboostjobs"
log "XGBoostJob Master + Worker trained the same model"

# 3. A TrainJob that sets a variable the xgboost runtime owns is refused when applied, naming it.
sed 's/name: xgb$/name: xgbbad/' "$WORK/xgb.yaml" > "$WORK/xgbbad.yaml"
printf '    env:\n      - {name: DMLC_TRACKER_PORT, value: "1"}\n' >> "$WORK/xgbbad.yaml"
if out=$("$CTL" apply -f "$WORK/xgbbad.yaml" 2>&1); then fail "xgbbad was accepted: $out"; fi
assert_contains "$out" "spec.trainer.env: DMLC_TRACKER_PORT is reserved for the xgboost runtime" "xgbbad refusal"
"$CTL" get trainjobs xgbbad >/dev/null 2>&1 && fail "xgbbad was created although refused"
log "reserved DMLC_* env refused at apply"
echo "PASS xgboost_test"
