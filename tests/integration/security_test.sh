#!/usr/bin/env bash
# CURVE + per-role allowlists: unknown keys and agent keys on the operator endpoint are refused,
# an unknown agent never registers, nothing is launched by anyone refused, and a second agent
# holding an enrolled key is not heard as that key's node.
source "$(dirname "$0")/lib.sh"

start_cluster 1 --slots 2
endpoint=$(awk '/^coordinator:/ {print $2}' "$TRAINLET_HOME/config.yaml")

# make_home DIR KEYFILE [COORDINATOR_PUB]: a client config using that key
make_home() {
  mkdir -p "$1"
  printf 'coordinator: %s\ncoordinator_key: %s\nkey: %s\n' "$endpoint" \
    "${3:-$TRAINLET_HOME/keys/coordinator.key.pub}" "$2" > "$1/config.yaml"
}
job=$(write_job evil 1 1 'sleep 60')

# 1. An operator key the coordinator never enrolled.
"$CTL" keys create --role operator --name stranger --dir "$WORK/strangers" >/dev/null
make_home "$WORK/stranger-home" "$WORK/strangers/stranger.key"
if "$CTL" --home "$WORK/stranger-home" apply -f "$job" 2> "$WORK/err"; then fail "unknown key was accepted"; fi
assert_contains "$(cat "$WORK/err")" "refused this operator key" "unknown operator key"
log "unknown operator key refused"

# 2. An agent's key used on the operator endpoint.
make_home "$WORK/agent-home" "$TRAINLET_HOME/keys/node-1.key"
if "$CTL" --home "$WORK/agent-home" apply -f "$job" 2> "$WORK/err"; then fail "agent key was accepted as operator"; fi
assert_contains "$(cat "$WORK/err")" "refused this operator key" "agent key as operator"
log "agent key on the operator endpoint refused"

# 3. The right operator key but the wrong coordinator key: the client refuses the server.
"$CTL" keys create --role coordinator --name fake --dir "$WORK/strangers" >/dev/null
make_home "$WORK/fake-server-home" "$TRAINLET_HOME/keys/operator.key" "$WORK/strangers/fake.key.pub"
if timeout 20 "$CTL" --home "$WORK/fake-server-home" get nodes 2> "$WORK/err"; then fail "wrong server key accepted"; fi
log "wrong coordinator key refused: $(cat "$WORK/err")"

# 4. An agent with a key that is not enrolled never registers.
"$CTL" keys create --role agent --name intruder --dir "$WORK/strangers" >/dev/null
agent_endpoint=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["agent_endpoint"])' \
  "$TRAINLET_HOME/coordinator/endpoints.json")
"$TRAINLET_BIN/trainlet-agent" --name intruder --coordinator "$agent_endpoint" \
  --coordinator-key "$TRAINLET_HOME/keys/coordinator.key.pub" --key "$WORK/strangers/intruder.key" \
  --state-dir "$WORK/intruder" --heartbeat-ms 100 > "$WORK/intruder.log" 2>&1 &
EXTRA_PIDS+=($!)
sleep 2
nodes=$("$CTL" get nodes -o name)
[ "$nodes" = "node/node-1" ] || fail "only node-1 may be registered, got: $nodes"
kill "${EXTRA_PIDS[-1]}"; wait "${EXTRA_PIDS[-1]}" 2>/dev/null || true
log "unenrolled agent never registered"

# Nothing was launched by any of them.
[ -z "$("$CTL" get trainjobs -o name 2>/dev/null)" ] || fail "a job was stored: $("$CTL" get trainjobs)"
[ -z "$(job_pids evil)" ] || fail "processes of a refused job exist"
grep -q "refused CURVE client" "$TRAINLET_HOME/logs/coordinator.log" || fail "refusals not logged"

# 5. Enrolling a key takes effect without a restart.
"$CTL" keys create --role operator --name alice --dir "$WORK/strangers" \
  --allowlist "$TRAINLET_HOME/keys/operators.allow" >/dev/null
make_home "$WORK/alice-home" "$WORK/strangers/alice.key"
"$CTL" --home "$WORK/alice-home" get nodes >/dev/null || fail "an enrolled operator was refused"
log "enrolment without restart ok"
# 6. A key may register only the name its agents.allow line gives it (issue 19, defect 7).
# node-3's key is enrolled as "node-3"; it tries another name that is free, and node-1's name.
"$CTL" keys create --role agent --name node-3 --dir "$WORK/strangers" \
  --allowlist "$TRAINLET_HOME/keys/agents.allow" >/dev/null
node3_pub=$(awk '/^public-key/ {gsub(/"/, "", $3); print $3}' "$WORK/strangers/node-3.key.pub")
for impostor in node-9 node-1; do
  "$TRAINLET_BIN/trainlet-agent" --name "$impostor" --coordinator "$agent_endpoint" \
    --coordinator-key "$TRAINLET_HOME/keys/coordinator.key.pub" --key "$WORK/strangers/node-3.key" \
    --state-dir "$WORK/impostor-$impostor" --heartbeat-ms 100 > "$WORK/impostor.log" 2>&1 &
  EXTRA_PIDS+=($!)
  sleep 2
  nodes=$("$CTL" get nodes -o name | tr '\n' ' ')
  [ "$nodes" = "node/node-1 " ] || fail "node-3's key registered as $impostor: $nodes"
  kill "${EXTRA_PIDS[-1]}"; wait "${EXTRA_PIDS[-1]}" 2>/dev/null || true
  grep -qF "key $node3_pub may register only as node node-3, not $impostor" \
    "$TRAINLET_HOME/logs/coordinator.log" || fail "refusal of $impostor does not name key and name"
  # A refused agent backs off and both sides rate-limit the warning (issue 19, defect 6): a
  # handful of lines in 2 s, where a retry loop wrote tens of thousands.
  agent_lines=$(grep -c "refused this agent's registration" "$WORK/impostor.log" || true)
  coord_lines=$(grep -c "refused registration of $impostor" "$TRAINLET_HOME/logs/coordinator.log" || true)
  [ "$agent_lines" -ge 1 ] && [ "$agent_lines" -le 5 ] ||
    fail "the refused agent logged $agent_lines refusals in 2 s"
  [ "$coord_lines" -ge 1 ] && [ "$coord_lines" -le 5 ] ||
    fail "the coordinator logged $coord_lines refusals of $impostor in 2 s"
  log "refusals of $impostor logged in 2 s: agent $agent_lines, coordinator $coord_lines"
  [ "$(wc -l < "$WORK/impostor.log")" -lt 50 ] || fail "the refused agent's log grew to $(wc -l < "$WORK/impostor.log") lines"
done
log "a key registers only the name the allowlist gives it"

# 7. A second agent holding node-1's own key, refused as node-8, is never heard as node-1: its
# beats do not take node-1's connection, so node-1's jobs are neither sent to it nor reported by
# it (a copied key on another machine).
"$TRAINLET_BIN/trainlet-agent" --name node-8 --coordinator "$agent_endpoint" \
  --coordinator-key "$TRAINLET_HOME/keys/coordinator.key.pub" --key "$TRAINLET_HOME/keys/node-1.key" \
  --state-dir "$WORK/thief" --heartbeat-ms 100 --metrics-address 127.0.0.1:0 --progress-port -1 \
  > "$WORK/thief.log" 2>&1 &
EXTRA_PIDS+=($!)
sleep 1
for i in 1 2 3 4; do
  "$CTL" apply -f "$(write_job "mine-$i" 1 1 'echo ran-here')" --wait --timeout 60s >/dev/null ||
    fail "mine-$i did not succeed beside the copied key: $("$CTL" describe trainjob "mine-$i")"
  assert_contains "$("$CTL" logs "mine-$i")" "ran-here" "logs of mine-$i"
done
ran=$(find "$WORK/thief" -name 'mine-*' | head -3)
[ -z "$ran" ] || fail "the refused agent ran ranks: $ran"
nodes=$("$CTL" get nodes -o name | tr '\n' ' ')
[ "$nodes" = "node/node-1 " ] || fail "the copied key registered: $nodes"
kill "${EXTRA_PIDS[-1]}"; wait "${EXTRA_PIDS[-1]}" 2>/dev/null || true
log "a second agent with node-1's key was not heard as node-1"
echo "PASS security_test"
