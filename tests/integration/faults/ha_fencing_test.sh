#!/usr/bin/env bash
# High availability (issue 17): the leader is stopped (SIGSTOP) for longer than its lease; the
# standby takes over and writes. The old leader is continued (SIGCONT): it steps down (exits, for
# its supervisor to start it again as a follower) and nothing it writes lands in etcd. Then
# losing one etcd member changes nothing, losing quorum makes the leader step down and an apply
# is refused, and with quorum back a coordinator leads again with everything acknowledged kept.
# Last, both coordinators are restarted at once and the state is intact. A job's rank runs on one
# agent all along: it keeps its pid through the stop, the quorum loss and the double restart.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/ha_lib.sh"

start_cluster 1 --slots 2
capture_local_cluster
start_etcd
# An etcd outage longer than the default 10 s partition grace would stop the ranks, as documented.
HA_COORDINATOR_FLAGS=(--partition-grace-ms 60000)
start_coordinator 1
wait_for 15 grep -q "elected leader" "$WORK/coord1.log" || { ha_logs; fail "coordinator 1 never led"; }
start_coordinator 2
wait_for 15 grep -q "following until elected" "$WORK/coord2.log" || fail "coordinator 2 did not start"
start_agents "$AGENT_EP_1,$AGENT_EP_2"
use_coordinators "$OP_EP_1,$OP_EP_2"
wait_for 20 sh -c "'$CTL' get nodes | grep -q ' Ready'" || { ha_logs; fail "the node never Ready"; }
"$CTL" apply -f "$(write_job before 1 1 'exec sleep 600')" >/dev/null || { ha_logs; fail "apply before"; }
wait_for 20 sh -c "'$CTL' get trainjobs before | grep -q Running" || { ha_logs; fail "before never Running"; }
rank_pid=$(job_pids before)
[ "$(wc -w <<<"$rank_pid")" = 1 ] || fail "want one rank of before, got '$rank_pid'"

# Store keys (not the election's) and the highest revision among them.
store_state() {
  etcdctl_ get --prefix "$HA_PREFIX" -w json | python3 -c '
import json, sys, base64
kvs = json.load(sys.stdin).get("kvs", [])
store = [kv for kv in kvs if not base64.b64decode(kv["key"]).decode().startswith(sys.argv[1] + "election/")]
print(len(store), max((int(kv["mod_revision"]) for kv in store), default=0))' "$HA_PREFIX"
}

kill -STOP "$COORD_PID_1"
log "leader stopped"
wait_for 15 grep -q "elected leader" "$WORK/coord2.log" || { ha_logs; fail "coordinator 2 never took over"; }
use_coordinators "$OP_EP_2"
"$CTL" apply -f "$(write_job by-new 1 1 'sleep 600')" >/dev/null || { ha_logs; fail "apply through the new leader"; }
sleep 1
state=$(store_state)
log "store before SIGCONT: $state (keys, highest revision)"

kill -CONT "$COORD_PID_1"
for _ in $(seq 100); do kill -0 "$COORD_PID_1" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$COORD_PID_1" 2>/dev/null; then ha_logs; fail "the old leader is still running 10 s after SIGCONT"; fi
grep -q "stepping down as leader" "$WORK/coord1.log" || { ha_logs; fail "the old leader did not say it stepped down"; }
[ "$(store_state)" = "$state" ] || fail "the old leader wrote after losing its lease: $state -> $(store_state)"
log "old leader stepped down; nothing of it landed"
# Its supervisor starts it again: it follows.
start_coordinator 1
wait_for 15 grep -q "following until elected" "$WORK/coord1.log" || fail "coordinator 1 did not come back"
use_coordinators "$OP_EP_1"
"$CTL" get trainjobs by-new >/dev/null || { ha_logs; fail "the restarted follower does not lead clients to the leader"; }
use_coordinators "$OP_EP_1,$OP_EP_2"

# One etcd member lost (not etcd's own leader): nothing changes.
first=$(etcd_follower) || fail "no etcd follower member found"
kill -9 "${ETCD_PIDS[$first]}"
"$CTL" apply -f "$(write_job one-lost 1 1 'true')" >/dev/null || { ha_logs; fail "apply with one etcd member lost"; }
# Quorum lost: the leader steps down; applies are refused.
second=$(( (first + 1) % 3 ))
kill -9 "${ETCD_PIDS[$second]}"
log "etcd quorum lost"
for _ in $(seq 100); do kill -0 "$COORD_PID_2" 2>/dev/null || break; sleep 0.1; done
kill -0 "$COORD_PID_2" 2>/dev/null && { ha_logs; fail "the leader did not step down without quorum"; }
# The client looks for a leader for its request timeout (15 s by default); 5 s is as telling.
if timeout 20 "$CTL" --request-timeout 5s apply -f "$(write_job no-quorum 1 1 'true')" 2> "$WORK/err" >/dev/null; then
  fail "apply accepted without quorum"
fi
log "apply without quorum refused: $(cat "$WORK/err")"
grep -q "no quorum" "$WORK/err" || { ha_logs; fail "the refusal without quorum does not say so: $(cat "$WORK/err")"; }
# Quorum back: the followers campaign again and one leads with everything acknowledged.
for i in $first $second; do eval "$(cat "$WORK/etcd/m$i.cmd") >> '$WORK/etcd/m$i.log' 2>&1 &"; EXTRA_PIDS+=("$!"); done
start_coordinator 2
wait_for 30 "$CTL" get trainjobs one-lost || { ha_logs; fail "no leader after quorum returned"; }
for j in before by-new one-lost; do "$CTL" get trainjobs "$j" >/dev/null || fail "$j lost"; done
"$CTL" get trainjobs no-quorum >/dev/null 2>&1 && fail "the refused job exists"
# The rank ran on through the quorum loss, and its job with it.
kill -0 "$rank_pid" 2>/dev/null || fail "the rank (pid $rank_pid) did not survive the quorum loss"
[ "$(job_pids before)" = "$rank_pid" ] || fail "before's rank changed: $(job_pids before)"
wait_for 15 sh -c "'$CTL' describe trainjob before | grep -q 'Attempt: *1 '" \
  || fail "before restarted: $("$CTL" describe trainjob before)"
"$CTL" get trainjobs before | grep -q Running || fail "before is not Running: $("$CTL" get trainjobs before)"
log "the rank kept running through the quorum loss (pid $rank_pid)"

# Both coordinators restarted at once: the state is intact.
"$CTL" get trainjobs -o json > "$WORK/before.json"
kill -9 "$COORD_PID_1" "$COORD_PID_2" 2>/dev/null || true
start_coordinator 1
start_coordinator 2
wait_for 30 "$CTL" get trainjobs before || { ha_logs; fail "no leader after both restarted"; }
"$CTL" get trainjobs -o json > "$WORK/after.json"
# What is stored, not what the live agent reports (its ranks' last heartbeat changes meanwhile).
python3 - "$WORK/before.json" "$WORK/after.json" <<'PY' || fail "jobs differ after both restarted"
import json, sys
def stored(j):
    keys = ("name", "phase", "attempt", "command", "runtime", "placement", "attempts",
            "createdUnixMs", "maxRestarts")
    missing = [k for k in keys if k not in j]
    if missing: sys.exit(f"no {missing} in {sorted(j)}")
    return {k: j[k] for k in keys}
a, b = ([stored(j) for j in json.load(open(p))["jobs"]] for p in sys.argv[1:3])
print("jobs before and after:", [j["name"] for j in a], [j["name"] for j in b])
for x, y in zip(a, b):
    if x != y: print("differs:", x, y)
sys.exit(0 if a == b and len(a) >= 3 else 1)
PY
kill -0 "$rank_pid" 2>/dev/null || fail "the rank did not survive both coordinators restarting"
echo "PASS ha_fencing_test"
