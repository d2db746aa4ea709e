#!/usr/bin/env bash
# Port reservation under contention: 10 torch-distributed jobs at once on one agent. Each job's
# MASTER_PORT is reserved by the agent before its plan is made; each rank binds and listens on it,
# so a port handed out twice would make a rank fail. Checked from outside with ss: while the jobs
# run, every job has its own port and each listening port of the range appears once; after they
# end, nothing of the agent's or the jobs' listens in the worker port range any more.
source "$(dirname "$0")/lib.sh"

JOBS=10
start_cluster 1 --slots $((JOBS + 2))
AGENT_PID=$(awk '{print $1}' "$TRAINLET_HOME/pids/node-1.pid")  # "pid starttime"
[ "$(cat "/proc/$AGENT_PID/comm")" = trainlet-agent ] || fail "no agent pid found"
ADDR=127.0.0.2  # local up's first agent

OUT="$WORK/out"
mkdir -p "$OUT"
# The rank: listen on MASTER_ADDR:MASTER_PORT (as torch's store would), record the port, then
# wait for the test to let it go.
cat > "$WORK/rank.py" <<'PY'
import os, socket, sys, time
out = sys.argv[1]
job = os.environ["TRAINLET_JOB"]
port = int(os.environ["MASTER_PORT"])
s = socket.socket()
try:
    s.bind((os.environ["MASTER_ADDR"], port))
except OSError as e:
    open(f"{out}/{job}.err", "w").write(f"bind {port}: {e}\n")
    sys.exit(3)
s.listen(4)
open(f"{out}/{job}.port.tmp", "w").write(f"{port}\n")
os.rename(f"{out}/{job}.port.tmp", f"{out}/{job}.port")
deadline = time.time() + 40
while not os.path.exists(f"{out}/go") and time.time() < deadline:
    time.sleep(0.05)
PY

for i in $(seq 1 $JOBS); do
  cat > "$WORK/p$i.yaml" <<EOF
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: p$i
spec:
  runtimeRef:
    name: torch-distributed
  trainer:
    numNodes: 1
    numProcPerNode: 1
    command: ["python3", "$WORK/rank.py", "$OUT"]
EOF
  "$CTL" apply -f "$WORK/p$i.yaml" >/dev/null
done
log "applied $JOBS jobs"

all_listening() { [ "$(ls "$OUT"/*.port 2>/dev/null | wc -l)" -eq $JOBS ]; }
if ! wait_for 30 all_listening; then
  cat "$OUT"/*.err 2>/dev/null || true
  "$CTL" get trainjobs || true
  fail "only $(ls "$OUT"/*.port 2>/dev/null | wc -l) of $JOBS ranks listen on their MASTER_PORT"
fi
[ -z "$(ls "$OUT"/*.err 2>/dev/null)" ] || fail "a rank could not bind its port: $(cat "$OUT"/*.err)"

ports=$(cat "$OUT"/*.port | sort -n)
[ "$(uniq <<<"$ports" | wc -l)" -eq $JOBS ] || fail "a MASTER_PORT was given twice: $(tr '\n' ' ' <<<"$ports")"
for p in $ports; do
  [ "$p" -ge 20000 ] && [ "$p" -le 29999 ] || fail "port $p is outside worker_ports 20000-29999"
done

# From outside: listeners on the agent's address in the worker range, with their owners.
range_listeners() {
  ss -Hltnp "src $ADDR" 2>/dev/null | awk '{print $4, $6}' | while read -r local users; do
    port=${local##*:}
    if [ "$port" -ge 20000 ] && [ "$port" -le 29999 ]; then echo "$port $users"; fi
  done
}
during=$(range_listeners)
listed=$(awk '{print $1}' <<<"$during" | sort -n)
[ "$(uniq -d <<<"$listed")" = "" ] || fail "a port is listed twice: $during"
for p in $ports; do
  grep -q "^$p " <<<"$during" || fail "port $p of a rank is not listening: $during"
done
# The agent has handed every port over: it holds none of them itself any more.
if grep -q "pid=$AGENT_PID," <<<"$during"; then fail "the agent still holds a port: $during"; fi
log "$JOBS ranks listen on $JOBS distinct reserved ports: $(tr '\n' ' ' <<<"$ports")"

touch "$OUT/go"
for i in $(seq 1 $JOBS); do
  "$CTL" wait "trainjob/p$i" --for=condition=Complete --timeout=30s >/dev/null ||
    fail "p$i did not complete: $("$CTL" get trainjobs)"
done

# Nothing of ours stays listening in the range: not the agent, not a rank.
none_left() { ! range_listeners | grep -qE "pid=$AGENT_PID,|python3"; }
wait_for 10 none_left || fail "still listening after the jobs ended: $(range_listeners)"
for p in $ports; do
  if range_listeners | grep -q "^$p "; then fail "port $p still listening after the jobs ended"; fi
done
# The agent holds no socket in the range at all (listening or not).
if ss -Htanp "src $ADDR" 2>/dev/null | grep "pid=$AGENT_PID," | awk '{print $4}' |
  awk -F: '$NF >= 20000 && $NF <= 29999' | grep -q .; then
  fail "the agent still has sockets in the worker range"
fi

# A second round is reserved and started as well (the cursor has moved past the freed ports).
rm -f "$OUT"/*.port
for i in $(seq 1 $JOBS); do "$CTL" delete "trainjob/p$i" >/dev/null; done
for i in 1 2 3; do "$CTL" apply -f "$WORK/p$i.yaml" >/dev/null; done
wait_for 30 sh -c "[ \$(ls '$OUT'/*.port 2>/dev/null | wc -l) -eq 3 ]" || fail "second round did not start"
log "second round started; ports $(cat "$OUT"/*.port | tr '\n' ' ')"
echo "PASS ports_test"
