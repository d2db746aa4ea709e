#!/usr/bin/env bash
# Ranks that would resume from different state fail fast (issue 18). pytorch/examples' DDP
# tutorial, restarted after a rank was killed, resumed at epoch 10 on the node that had written
# its checkpoint and at epoch 0 on the other, and hung in mismatched collectives until its
# deadline. Here the same job, with per-node work dirs and its checkpoint named
# (trainlet.io/checkpoint-path), fails at its restart within seconds, naming the nodes and what
# each holds, and no rank of the restart starts.
source "$(dirname "$0")/lib.sh"

OUT="$WORK/out"
mkdir -p "$OUT"
start_cluster 2

# shellcheck disable=SC2016
DDP='epoch=0; [ -f snapshot ] && epoch=$(cat snapshot)
echo "attempt=$TRAINLET_ATTEMPT rank=$TRAINLET_RANK epoch=$epoch" >> "'"$OUT"'/$TRAINLET_JOB.log"
if [ "$TRAINLET_ATTEMPT" = 1 ]; then
  if [ "$TRAINLET_RANK" = 0 ]; then echo 10 > snapshot.tmp; mv snapshot.tmp snapshot; fi
  exec sleep 300
fi'
{ retry_runtime_yaml ckpt-retry 3 | sed 's/numNodes: 1/numNodes: 2/'; echo ---
  printf 'apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata:\n  name: ddp\n'
  printf '  annotations: {trainlet.io/checkpoint-path: snapshot}\n'
  printf 'spec:\n  runtimeRef:\n    name: ckpt-retry\n  trainer:\n    command:\n      - /bin/sh\n      - -c\n      - |\n'
  printf '%s\n' "$DDP" | sed 's/^/        /'; } > "$WORK/ddp.yaml"
"$CTL" apply -f "$WORK/ddp.yaml" >/dev/null
wait_for 30 sh -c "'$CTL' get trainjobs ddp | grep -qE 'Running +2 +2 +1 '" \
  || fail "ddp never Running: $("$CTL" describe trainjob ddp)"
wait_for 20 sh -c "ls '$TRAINLET_HOME'/agents/*/work/ddp/snapshot" || fail "rank 0 wrote no checkpoint"
RANK1=$("$CTL" get trainjobs ddp -o json | python3 -c '
import json, sys
print(next(r["pid"] for r in json.load(sys.stdin)["jobs"][0]["ranks"] if r.get("rank", 0) == 1))')
KILLED=$(date +%s)
kill -9 "$RANK1"
log "killed rank 1 (pid $RANK1)"
wait_for 20 sh -c "'$CTL' get trainjobs ddp | grep -q ' Failed '" \
  || fail "ddp did not fail: $("$CTL" describe trainjob ddp)"
ELAPSED=$(( $(date +%s) - KILLED ))
[ "$ELAPSED" -le 10 ] || fail "ddp took ${ELAPSED}s to fail"
DESCRIBE=$("$CTL" describe trainjob ddp)
assert_contains "$DESCRIBE" "DivergentWorkDirs" "describe ddp"
assert_contains "$DESCRIBE" "the ranks would resume from different state" "describe ddp"
assert_contains "$DESCRIBE" "missing, in a work dir last run by attempt 1 on node-" "describe ddp"
assert_contains "$DESCRIBE" "trainlet.io/working-dir: shared" "describe ddp"
if grep -q '^attempt=2 ' "$OUT/ddp.log"; then fail "a rank of attempt 2 started: $(cat "$OUT/ddp.log")"; fi
log "PASS (failed ${ELAPSED}s after the kill)"
