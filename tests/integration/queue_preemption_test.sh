#!/usr/bin/env bash
# Preemption end to end (issue 14): a low-priority job holds its ClusterQueue's whole quota; a
# high-priority job arrives in the same queue. The queue preempts the low one: its rank gets
# SIGUSR1, writes a checkpoint and exits; the job is Suspended (Preempted), not Failed. The high
# one is admitted, runs and completes. Then the low one is admitted again and resumes as a new
# attempt with TRAINLET_PREEMPTED=1, continuing from its checkpoint to the end. The events say
# it all, and the preemption does not count against the low job's restarts.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/preemption_lib.sh"

start_cluster 1 --slots 4

preemption_queues

low=$(checkpoint_job low "" '    trainlet.io/preemption-grace-seconds: "10"' \
  '      - name: CKPT_STEPS\n        value: "400"')
queued "$low" low
"$CTL" apply -f "$low" >/dev/null
wait_for 30 ckpt_progress_at_least low 50 || fail "low never ran: $("$CTL" describe trainjob low)"
log "low runs (step $(ckpt_progress low))"

high=$WORK/high.yaml
{
  printf 'apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata:\n  name: high\n'
  printf '  annotations:\n    trainlet.io/max-restarts: "0"\n'
  printf 'spec:\n  runtimeRef:\n    name: plain\n  trainer:\n    numNodes: 1\n    numProcPerNode: 1\n'
  printf '    command: ["/bin/sh", "-c", "sleep 2"]\n'
} > "$high"
queued "$high" high
"$CTL" apply -f "$high" >/dev/null

wait_for 20 ckpt_has low usr1 || fail "low was never warned: $("$CTL" describe trainjob low)"
warned_at=$(ckpt_step low)
log "low warned and checkpointed at step $warned_at"
wait_for 20 sh -c "'$CTL' get trainjob low | grep -q Suspended" ||
  fail "low not Suspended after its preemption: $("$CTL" describe trainjob low)"
d=$("$CTL" describe trainjob low)
assert_contains "$d" "Preempted by default/high (priority 1000)" "low's events"
"$CTL" wait trainjob/high --for=condition=Complete --timeout=60s >/dev/null ||
  fail "high did not complete: $("$CTL" describe trainjob high)"
assert_contains "$("$CTL" describe trainjob high)" "Preempting default/low" "high's events"
log "high admitted over low and completed"

"$CTL" wait trainjob/low --for=condition=Complete --timeout=90s >/dev/null ||
  fail "low did not resume and complete: $("$CTL" describe trainjob low)"
start2=$(ckpt_events low start | sed -n 2p)
assert_contains "$start2" "attempt=2 from=$warned_at preempted=1" "low's second start"
[ "$(ckpt_events low term)" = "" ] || fail "low got SIGTERM: it should have left in the grace"
d=$("$CTL" get trainjobs low -o json)
python3 - "$d" <<'PY' || fail "low's status after the preemption: $d"
import json, sys
j = json.loads(sys.argv[1])["jobs"][0]
admitted = [e for e in j.get("events", []) if e.get("reason") == "Admitted"]
assert len(admitted) == 2, admitted             # admitted, preempted, admitted again
assert int(j.get("preemptions", 0)) == 1, j.get("preemptions")
results = [a.get("attemptResult") for a in j.get("attempts", [])]
assert "ATTEMPT_RESULT_FAILED" not in results, results  # no restart used up
PY
log "low resumed from step $warned_at as attempt 2 with TRAINLET_PREEMPTED=1 and completed"
echo "PASS queue_preemption_test"
