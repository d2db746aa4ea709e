#!/usr/bin/env bash
# Training Operator jobs on a local cluster (issue 18): a kubeflow.org/v1 PyTorchJob with a
# Master and 2 Workers running a real gloo all_reduce and DDP steps (Debian's python3-torch,
# direct launch: the operator's MASTER_ADDR/MASTER_PORT/WORLD_SIZE/RANK), and a TFJob whose PS
# and Workers check their TF_CONFIG against the operator's format. `get pytorchjobs` and
# `get tfjobs` list them under their own kind, `describe` says what each became, and a short
# TrainJob with only its name and spec.suspend suspends a running job, as Kubeflow's lifecycle
# guide applies it.
source "$(dirname "$0")/lib.sh"
/usr/bin/python3 -c 'import torch.distributed' 2>/dev/null \
  || fail "Debian's python3-torch is not installed (apt-get install python3-torch)"

start_cluster 3
log "cluster up"
train="$TRAINLET_SOURCE_DIR/examples/torch-ddp/train.py"

# 1. PyTorchJob: Master + 2 Workers, one process each, ranks 0..2.
replica() {  # replica TYPE COUNT COMMAND...
  local type=$1 count=$2; shift 2
  printf '    %s:\n      replicas: %s\n      restartPolicy: OnFailure\n' "$type" "$count"
  printf '      template:\n        spec:\n          containers:\n          - name: %s\n' "$CONTAINER"
  printf '            image: docker.io/kubeflowkatib/pytorch-mnist:v1beta1-45c5727\n'
  printf '            env:\n            - {name: GLOO_SOCKET_IFNAME, value: lo}\n'
  printf '            command:\n'
  for a in "$@"; do printf '            - "%s"\n' "$a"; done
}
CONTAINER=pytorch
{
  printf 'apiVersion: kubeflow.org/v1\nkind: PyTorchJob\nmetadata:\n  name: pt\n'
  printf 'spec:\n  pytorchReplicaSpecs:\n'
  replica Master 1 /usr/bin/python3 "$train"
  replica Worker 2 /usr/bin/python3 "$train"
} > "$WORK/pt.yaml"
out=$("$CTL" apply -f "$WORK/pt.yaml" 2>&1) || fail "apply of a PyTorchJob: $out"
assert_contains "$out" "PyTorchJob/pt: became TrainJob pt" "apply's notes"
"$CTL" wait trainjob/pt --for=condition=Complete --timeout=120s \
  || fail "the PyTorchJob did not complete: $("$CTL" describe trainjob pt) $("$CTL" logs pt)"
logs=$("$CTL" logs pt)
[ "$(grep -c "all_reduce sum 6 (expected 6) OK" <<<"$logs")" = 3 ] \
  || fail "expected 3 ranks to all_reduce to 6: $logs"
[ "$(grep -c "ddp replicas in sync" <<<"$logs")" = 3 ] || fail "DDP replicas: $logs"
for r in 0 1 2; do assert_contains "$logs" "rank $r of 3" "rank $r"; done
d=$("$CTL" describe pytorchjob pt)
assert_contains "$d" "Kind:" "describe of a PyTorchJob"
assert_contains "$d" "PyTorchJob (kubeflow.org/v1), run as TrainJob pt" "describe's kind"
assert_contains "$d" "TrainingRuntime/pytorchjob.kubeflow.org (plugin torch)" "describe's runtime"
log "PyTorchJob Master + 2 Workers: gloo all_reduce and DDP complete"

# 2. TFJob: PS + 2 Workers; each replica checks TF_CONFIG as the operator writes it.
cat > "$WORK/check_tf.py" <<'PY'
import json, os
c = json.loads(os.environ["TF_CONFIG"])
assert list(c) == ["cluster", "task", "environment"], list(c)
assert c["environment"] == "cloud"
assert sorted(c["cluster"]) == ["ps", "worker"], c
assert len(c["cluster"]["ps"]) == 1 and len(c["cluster"]["worker"]) == 2, c
t = c["task"]
assert list(t) == ["type", "index"], t
rank = int(os.environ["TRAINLET_RANK"])
assert (t["type"], t["index"]) == [("ps", 0), ("worker", 0), ("worker", 1)][rank], (rank, t)
host, port = c["cluster"][t["type"]][t["index"]].rsplit(":", 1)
assert int(port) > 0
print("TF_CONFIG ok", t["type"], t["index"], flush=True)
PY
CONTAINER=tensorflow
{
  printf 'apiVersion: kubeflow.org/v1\nkind: TFJob\nmetadata:\n  name: tf\n'
  printf 'spec:\n  tfReplicaSpecs:\n'
  replica PS 1 /usr/bin/python3 "$WORK/check_tf.py"
  replica Worker 2 /usr/bin/python3 "$WORK/check_tf.py"
} > "$WORK/tf.yaml"
"$CTL" apply -f "$WORK/tf.yaml" >/dev/null || fail "apply of a TFJob"
"$CTL" wait trainjob/tf --for=condition=Complete --timeout=60s \
  || fail "the TFJob did not complete: $("$CTL" describe trainjob tf) $("$CTL" logs tf)"
logs=$("$CTL" logs tf)
for want in "TF_CONFIG ok ps 0" "TF_CONFIG ok worker 0" "TF_CONFIG ok worker 1"; do
  assert_contains "$logs" "$want" "the TFJob's replicas"
done
log "TFJob PS + 2 Workers: TF_CONFIG as the operator writes it"

# 3. Each kind lists its own jobs.
pts=$("$CTL" get pytorchjobs)
assert_contains "$pts" "pt " "get pytorchjobs"
case "$pts" in *"tf "*) fail "get pytorchjobs lists the TFJob: $pts" ;; esac
tfs=$("$CTL" get tfjobs)
assert_contains "$tfs" "tf " "get tfjobs"
case "$tfs" in *"pt "*) fail "get tfjobs lists the PyTorchJob: $tfs" ;; esac
[ "$("$CTL" get jaxjobs 2>&1)" = "No jaxjobs found." ] || fail "get jaxjobs: $("$CTL" get jaxjobs 2>&1)"
assert_contains "$("$CTL" get trainjobs)" "pt " "get trainjobs lists every job"

# 4. Re-apply as kubectl does: the lifecycle guide's short document suspends a running job.
"$CTL" apply -f "$(write_job sleeper 1 1 'sleep 300')" >/dev/null
wait_for 30 sh -c "'$CTL' get trainjob sleeper | grep -q Running" \
  || fail "sleeper did not run: $("$CTL" describe trainjob sleeper)"
printf 'apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata:\n  name: sleeper\nspec:\n  suspend: true\n' \
  > "$WORK/short.yaml"
out=$("$CTL" apply -f "$WORK/short.yaml" 2>&1) || fail "apply of a short suspend document: $out"
"$CTL" wait trainjob/sleeper --for=condition=Suspended --timeout=30s \
  || fail "the short document did not suspend: $("$CTL" describe trainjob sleeper)"
log "a short TrainJob with only spec.suspend suspended the job"

# 5. Each replica runs in its own container's workingDir (issue 18; main reported it ignored):
# the Master's is relative to the job's work dir, the Worker's absolute.
mkdir -p "$WORK/worker-wd"
cat > "$WORK/wd.yaml" <<EOF
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: wd
spec:
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      template:
        spec:
          containers:
          - name: pytorch
            workingDir: master-wd
            command: ["/bin/sh", "-c", "echo cwd=\$(pwd -P)"]
    Worker:
      replicas: 1
      template:
        spec:
          containers:
          - name: pytorch
            workingDir: $WORK/worker-wd
            command: ["/bin/sh", "-c", "echo cwd=\$(pwd -P)"]
EOF
out=$("$CTL" apply -f "$WORK/wd.yaml" 2>&1) || fail "apply of a PyTorchJob with workingDir: $out"
case "$out" in *workingDir*) fail "workingDir reported: $out" ;; esac
"$CTL" wait trainjob/wd --for=condition=Complete --timeout=60s \
  || fail "the workingDir job did not complete: $("$CTL" describe trainjob wd) $("$CTL" logs wd)"
m=$("$CTL" logs wd --rank 0)
case "$m" in *"cwd=$(cd "$WORK" && pwd -P)/"*"/wd/master-wd"*) ;; *) fail "Master's cwd: $m" ;; esac
w=$("$CTL" logs wd --rank 1)
assert_contains "$w" "cwd=$(cd "$WORK/worker-wd" && pwd -P)" "Worker's cwd"
log "each replica ran in its container's workingDir"
echo "PASS v1_kinds_test"
