#!/usr/bin/env bash
# A lost store no longer kills the cluster (issue 19, defect 3). Before, a coordinator restarted
# on a trainlet.db truncated to 0 bytes started empty and told every agent to stop the ranks of
# the attempts it did not know.
#   1. A job runs; the coordinator is killed with SIGKILL and its database truncated to 0 bytes.
#   2. Restarted, the coordinator refuses the empty store, saying how to initialise one.
#   3. Initialised anew (a new cluster id) and started, it is refused by the agent, which belongs
#      to the old cluster: the job's ranks keep running, the same pids.
#   4. The documented re-point (delete the agent's cluster-id file) joins the agent to the new
#      cluster, which then stops the ranks it does not know.
source "$(dirname "$0")/../lib.sh"

# A partition grace longer than the test: the agent cut off from its own cluster keeps its ranks
# that long whatever happens.
start_cluster 1 --slots 2 --partition-grace-ms 300000
remember_coordinator
STATE="$TRAINLET_HOME/coordinator"
AGENT_STATE="$TRAINLET_HOME/agents/node-1"
old_id=$(cat "$AGENT_STATE/cluster-id")
[ -n "$old_id" ] || fail "the agent kept no cluster id"

"$CTL" apply -f "$(write_job keeper 1 2 'sleep 600')" >/dev/null
wait_for 20 sh -c "'$CTL' get trainjobs keeper | grep -q Running" || fail "keeper never Running"
pids=$(job_pids keeper | sort)
[ "$(wc -w <<<"$pids")" -ge 2 ] || fail "keeper's ranks not found: $pids"
log "keeper runs as $(echo $pids)"

# 1. The store is lost.
kill -9 "$COORD_PID"
wait_for 10 sh -c "! kill -0 $COORD_PID 2>/dev/null" || fail "the coordinator survived SIGKILL"
: > "$STATE/trainlet.db"
rm -f "$STATE/trainlet.db-wal" "$STATE/trainlet.db-shm"
log "coordinator killed, trainlet.db truncated to 0 bytes"

# 2. Refused.
restart_coordinator
wait_for 15 sh -c "! kill -0 $COORD_PID 2>/dev/null" || fail "a coordinator started on an empty store"
grep -q -- "--init-store" "$TRAINLET_HOME/logs/coordinator.log" \
  || fail "the refusal does not say how to initialise: $(tail -5 "$TRAINLET_HOME/logs/coordinator.log")"
log "the empty store was refused"

# 3. A new cluster: the agent refuses it and keeps its ranks.
"${COORD_ARGS[@]}" --init-store > "$WORK/init.out" 2>> "$TRAINLET_HOME/logs/coordinator.log" \
  || fail "--init-store failed: $(cat "$WORK/init.out")"
new_id=$(awk '/cluster id/ {print $3}' "$WORK/init.out")
[ -n "$new_id" ] && [ "$new_id" != "$old_id" ] || fail "no new cluster id: $(cat "$WORK/init.out")"
restart_coordinator
wait_for 20 grep -q "belongs to cluster $old_id" "$TRAINLET_HOME/logs/coordinator.log" \
  || fail "the agent was not refused: $(tail -20 "$TRAINLET_HOME/logs/coordinator.log")"
sleep 3
for p in $pids; do kill -0 "$p" 2>/dev/null || fail "rank pid $p died on the new cluster's word"; done
[ "$(job_pids keeper | sort)" = "$pids" ] || fail "keeper's ranks changed: $(job_pids keeper)"
if "$CTL" get nodes 2>/dev/null | grep -q node-1; then fail "node-1 joined the new cluster"; fi
[ "$(cat "$AGENT_STATE/cluster-id")" = "$old_id" ] || fail "the agent's cluster id changed"
log "the agent refused cluster $new_id and keeps keeper's ranks"

# 4. The documented re-point.
rm "$AGENT_STATE/cluster-id"
wait_for 60 sh -c "'$CTL' get nodes 2>/dev/null | grep -q 'node-1.*Ready'" \
  || fail "the re-pointed agent did not join: $(tail -5 "$TRAINLET_HOME/logs/node-1.log")"
[ "$(cat "$AGENT_STATE/cluster-id")" = "$new_id" ] || fail "the agent did not keep the new id"
# Joined on purpose: the new cluster knows nothing of keeper, so its ranks are stopped now.
gone() { for p in $pids; do kill -0 "$p" 2>/dev/null && return 1; done; return 0; }
wait_for 30 gone || fail "the new cluster did not stop the ranks it does not know"
log "re-pointed: node-1 joined cluster $new_id"
echo "PASS cluster_identity_test"
