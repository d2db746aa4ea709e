#!/usr/bin/env bash
# A preempted job keeps its quota while its ranks may still run (issue 14), with real daemons and a
# sampler that reads /proc every 50 ms and fails the test if the victim's rank and the
# preemptor's rank ever run at once in a ClusterQueue with room for one of them.
#  1. The victim's rank stays through its warning grace (CKPT_STAY): the preemptor is admitted
#     only once it has exited, and the victim is preempted once. Before, the next admission pass
#     picked the Suspended victim again, took it for a job admitted but not placed, and let its
#     quota go at once: both ran for most of the grace.
#  2. The victim's agent is stopped (SIGSTOP) before the preemption, so the stop never reaches
#     it; the node is Lost after 2 s, but the rank runs on until the step's orphan grace (the
#     partition grace) ends it. The preemptor waits for the coordinator's hold on that node
#     (partition, stop and warning graces and a margin). Before, a Lost rank counted as stopped
#     and the preemptor started beside it.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/preemption_lib.sh"

start_cluster 2 --slots 1 --partition-grace-ms 4000 --stop-grace-ms 1000

preemption_queues

# victim NAME: a low job whose rank stays through its 5 s warning grace, running.
victim() {
  local f
  f=$(checkpoint_job "$1" "" '    trainlet.io/preemption-grace-seconds: "5"' \
    '      - name: CKPT_STAY\n        value: "1"')
  queued "$f" low
  "$CTL" apply -f "$f" >/dev/null
  wait_for 30 ckpt_progress_at_least "$1" 20 || fail "$1 never ran: $("$CTL" describe trainjob "$1")"
}
# preemptor NAME: a high job whose rank runs 3 s ("sleep 3; true" marks it in /proc).
preemptor() {
  {
    printf 'apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata:\n  name: %s\n' "$1"
    printf '  annotations:\n    trainlet.io/max-restarts: "0"\n'
    printf 'spec:\n  runtimeRef:\n    name: plain\n  trainer:\n    numNodes: 1\n    numProcPerNode: 1\n'
    printf '    command: ["/bin/sh", "-c", "sleep 3; true"]\n'
  } > "$WORK/$1.yaml"
  queued "$WORK/$1.yaml" high
  "$CTL" apply -f "$WORK/$1.yaml" >/dev/null
}
preempted_events() {
  "$CTL" get trainjob "$1" -o json | python3 -c \
    'import json,sys; print(sum(e.get("reason") == "Preempted" for e in json.load(sys.stdin)["jobs"][0].get("events", [])))'
}

# The sampler: its patterns come in its env, so its own command line matches neither. Only ranks
# of this test's cluster count (their work dir is under its TRAINLET_HOME): tests run in parallel,
# and another's checkpoint_rank.py is no victim here.
cat > "$WORK/sampler.py" <<'PY'
import os, time
low, high, out, stop, home = (os.environ[k] for k in ("LOW_MARK", "HIGH_MARK", "OUT", "STOP", "TRAINLET_HOME"))
def running(mark):
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if mark in f.read().replace(b"\0", b" ").decode(errors="replace"):
                    with open(f"/proc/{pid}/environ", "rb") as f:
                        env = dict(v.split(b"=", 1) for v in f.read().split(b"\0") if b"=" in v)
                    if not env.get(b"TRAINLET_WORK_DIR", b"").decode(errors="replace").startswith(home + "/"):
                        continue
                    return f"pid {pid} {env.get(b'TRAINLET_JOB', b'?').decode()} attempt {env.get(b'TRAINLET_ATTEMPT', b'?').decode()}"
        except OSError:
            pass
    return None
while not os.path.exists(stop):
    a, b = running(low), running(high)
    if a and b:
        with open(out, "a") as f:
            f.write(f"{time.time():.3f} both ranks run: {a}; {b}\n")
    time.sleep(0.05)
PY
LOW_MARK=checkpoint_rank.py HIGH_MARK="sleep 3; true" OUT="$WORK/overlap" STOP="$WORK/stop" \
  python3 "$WORK/sampler.py" &
EXTRA_PIDS+=($!)
no_overlap() {
  [ ! -s "$WORK/overlap" ] || fail "$1: the victim's and the preemptor's ranks ran at once (quota 1 cpu, each asks 1): $(head -3 "$WORK/overlap"), $(wc -l < "$WORK/overlap") samples"
}

# 1. A victim in its grace keeps its quota, and is preempted once.
victim low1
preemptor high1
wait_for 20 ckpt_has low1 term || fail "low1 got no SIGTERM after its grace: $("$CTL" describe trainjob low1)"
"$CTL" wait trainjob/high1 --for=condition=Complete --timeout=60s >/dev/null ||
  fail "high1 did not complete: $("$CTL" describe trainjob high1)"
no_overlap "a victim in its warning grace"
[ "$(preempted_events low1)" = 1 ] || fail "low1 preempted more than once: $("$CTL" describe trainjob low1)"
"$CTL" delete trainjob low1 --timeout 30s >/dev/null
log "a victim in its grace kept its quota until its rank exited"

# 2. A victim on a stopped agent keeps its quota through the coordinator's hold on the node.
victim low2
node=$("$CTL" get trainjob low2 -o json |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["jobs"][0]["ranks"][0]["node"])')
agent=$(awk '{print $1}' "$TRAINLET_HOME/pids/$node.pid")
trap 'rc=$?; set +e; kill -CONT "$agent" 2>/dev/null; (exit $rc); cleanup' EXIT
kill -STOP "$agent"
preemptor high2
"$CTL" wait trainjob/high2 --for=condition=Complete --timeout=60s >/dev/null ||
  fail "high2 did not complete: $("$CTL" describe trainjob high2)"
no_overlap "a victim on a stopped agent"
kill -CONT "$agent"
touch "$WORK/stop"
log "a victim on a stopped agent kept its quota through the node's hold"
echo "PASS queue_preemption_grace_test"
