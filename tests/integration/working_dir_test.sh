#!/usr/bin/env bash
# Working directories (issue 18): a runtime container's workingDir, relative (under the job's work
# dir on each node) and absolute (used as is, refused by name when missing); and the cluster's
# shared directory: a job annotated trainlet.io/working-dir: shared runs in <shared_dir>/<job> on
# every node, is placed only on nodes whose agent has a shared_dir, and after a rank is killed
# both nodes resume from the checkpoint rank 0 wrote (pytorch/examples' DDP tutorial resumed at
# epoch 10 on one node and at epoch 0 on the other with per-node dirs).
source "$(dirname "$0")/lib.sh"

SHARED="$WORK/shared"
OUT="$WORK/out"
mkdir -p "$SHARED" "$WORK/abs" "$OUT"
# node-1 and node-2 mount the shared directory, node-3 does not.
start_cluster 3 --shared-dir "$SHARED" --shared-dir "$SHARED" --shared-dir -

# runtime NAME RESTARTS WORKING_DIR: a plain 2-node runtime whose node container sets workingDir.
runtime() {
  retry_runtime_yaml "$1" "$2" | sed 's/numNodes: 1/numNodes: 2/'
  [ -z "$3" ] || printf '                      workingDir: %s\n' "$3"
}
# job NAME RUNTIME ANNOTATIONS SCRIPT: a TrainJob (numNodes from the runtime) running `sh -c`.
job() {
  printf 'apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata:\n  name: %s\n' "$1"
  [ -z "$3" ] || printf '  annotations: {%s}\n' "$3"
  printf 'spec:\n  runtimeRef:\n    name: %s\n  trainer:\n    command:\n      - /bin/sh\n      - -c\n      - |\n' "$2"
  printf '%s\n' "$4" | sed 's/^/        /'
}
phase_is() { "$CTL" get trainjobs "$1" | grep -q " $2 "; }
# shellcheck disable=SC2016
PRINT_CWD='echo "$(pwd)" > "'"$OUT"'/$TRAINLET_JOB.$TRAINLET_RANK"'

log "(a) workingDir: relative, absolute, missing"
{ runtime wd-rel 0 out/run; echo ---; runtime wd-abs 0 "$WORK/abs"; echo ---
  runtime wd-missing 0 "$WORK/missing"; echo ---
  job rel wd-rel "" "$PRINT_CWD"; echo ---; job abs wd-abs "" "$PRINT_CWD"; echo ---
  job missing wd-missing "" "$PRINT_CWD"; } > "$WORK/a.yaml"
"$CTL" apply -f "$WORK/a.yaml" > "$WORK/apply-a.out" 2>&1 || fail "apply: $(cat "$WORK/apply-a.out")"
if grep -q workingDir "$WORK/apply-a.out"; then fail "workingDir still reported: $(cat "$WORK/apply-a.out")"; fi
for j in rel abs; do
  wait_for 30 phase_is $j Succeeded || fail "$j never Succeeded: $("$CTL" describe trainjob $j)"
done
for r in 0 1; do
  grep -qE "^$TRAINLET_HOME/agents/node-[123]/work/rel/out/run\$" "$OUT/rel.$r" \
    || fail "rank $r of rel ran in $(cat "$OUT/rel.$r")"
  [ "$(cat "$OUT/abs.$r")" = "$WORK/abs" ] || fail "rank $r of abs ran in $(cat "$OUT/abs.$r")"
done
DESCRIBE=$("$CTL" describe trainjob rel)
assert_contains "$DESCRIBE" "WORKING-DIR" "describe rel"
assert_contains "$DESCRIBE" "/work/rel/out/run" "describe rel"
wait_for 30 phase_is missing Failed || fail "missing never Failed: $("$CTL" describe trainjob missing)"
assert_contains "$("$CTL" describe trainjob missing)" \
  "working directory $WORK/missing (the container's workingDir): no such directory" "describe missing"

log "(b) a shared job: placed on the nodes with a shared_dir, resumes from one checkpoint"
# shellcheck disable=SC2016
DDP='epoch=0; [ -f snapshot ] && epoch=$(cat snapshot)
echo "attempt=$TRAINLET_ATTEMPT rank=$TRAINLET_RANK epoch=$epoch cwd=$(pwd)" >> "'"$OUT"'/$TRAINLET_JOB.log"
if [ "$TRAINLET_ATTEMPT" = 1 ]; then
  if [ "$TRAINLET_RANK" = 0 ]; then echo 10 > snapshot.tmp; mv snapshot.tmp snapshot; fi
  exec sleep 300
fi'
{ runtime ckpt-retry 1 ""; echo ---; job ddp-shared ckpt-retry "trainlet.io/working-dir: shared" "$DDP"; } \
  > "$WORK/b.yaml"
"$CTL" apply -f "$WORK/b.yaml" >/dev/null
wait_for 30 sh -c "'$CTL' get trainjobs ddp-shared | grep -qE 'Running +2 +2 +1 '" \
  || fail "ddp-shared never Running: $("$CTL" describe trainjob ddp-shared)"
wait_for 20 test -f "$SHARED/ddp-shared/snapshot" || fail "rank 0 wrote no checkpoint in $SHARED"
[ "$(stat -c %a "$SHARED/ddp-shared")" = 700 ] || fail "$SHARED/ddp-shared is not 0700"
DESCRIBE=$("$CTL" describe trainjob ddp-shared)
case "$DESCRIBE" in *node-3*) fail "a shared job was placed on node-3, which has no shared_dir: $DESCRIBE" ;; esac
assert_contains "$DESCRIBE" "$SHARED/ddp-shared" "describe ddp-shared"
RANK1=$("$CTL" get trainjobs ddp-shared -o json | python3 -c '
import json, sys
print(next(r["pid"] for r in json.load(sys.stdin)["jobs"][0]["ranks"] if r.get("rank", 0) == 1))')
kill -9 "$RANK1"
log "killed rank 1 (pid $RANK1)"
wait_for 30 phase_is ddp-shared Succeeded || fail "ddp-shared never Succeeded: $("$CTL" describe trainjob ddp-shared)"
RESUMED=$(grep '^attempt=2 ' "$OUT/ddp-shared.log" | sort)
[ "$(echo "$RESUMED" | grep -c "epoch=10 cwd=$SHARED/ddp-shared\$")" = 2 ] \
  || fail "attempt 2 did not resume both ranks from epoch 10 in $SHARED/ddp-shared: $(cat "$OUT/ddp-shared.log")"

log "deleting the shared job removes its shared directory and stamp, once (issue 18)"
[ -f "$SHARED/.trainlet-uids/ddp-shared" ] || fail "no UID stamp for ddp-shared in $SHARED"
"$CTL" delete trainjob ddp-shared --timeout 30s >/dev/null || fail "delete ddp-shared failed"
wait_for 10 sh -c "! test -e '$SHARED/ddp-shared'" \
  || fail "$SHARED/ddp-shared is still there after the delete: $(ls -la "$SHARED")"
[ ! -e "$SHARED/.trainlet-uids/ddp-shared" ] || fail "the stamp of ddp-shared is still there"

log "a shared job wider than the nodes with a shared_dir waits, naming the label"
job wide-shared ckpt-retry "trainlet.io/working-dir: shared" "true" \
  | sed 's/    command:/    numNodes: 3\n    command:/' > "$WORK/wide.yaml"
"$CTL" apply -f "$WORK/wide.yaml" >/dev/null
wait_for 10 sh -c "'$CTL' describe trainjob wide-shared | grep -q 'trainlet.io/shared-dir'" \
  || fail "wide-shared does not say why it waits: $("$CTL" describe trainjob wide-shared)"
phase_is wide-shared Pending || fail "wide-shared is not Pending: $("$CTL" describe trainjob wide-shared)"
log "PASS"
