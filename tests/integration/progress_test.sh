#!/usr/bin/env bash
# Training progress end to end (issue 15): ranks post Kubeflow's trainerStatus with curl, a client
# that is not trainlet's, to KUBEFLOW_TRAINER_SERVER_URL (their own agent, HTTPS); the agents
# forward it and the coordinator shows it: get trainjobs' PROGRESS and ETA, describe's metrics,
# -o json's trainerStatus under Kubeflow's names. With progress-timeout 2s, a pause in the posts
# makes the job Stalled, and the next post clears it.
# Exits 77 (skipped) when the agents give ranks no progress endpoint (a build without it).
source "$(dirname "$0")/lib.sh"

command -v curl >/dev/null || { echo "SKIP: no curl"; exit 77; }
start_cluster 2 --slots 2

post='post() {
  [ -n "${KUBEFLOW_TRAINER_SERVER_URL:-}" ] || { echo NO_PROGRESS_ENV; exit 0; }
  curl -sS --fail --cacert "$KUBEFLOW_TRAINER_SERVER_CA_CERT" \
    -H "Authorization: Bearer $(cat "$KUBEFLOW_TRAINER_SERVER_TOKEN")" \
    -H "Content-Type: application/json" -d "$1" "$KUBEFLOW_TRAINER_SERVER_URL" >/dev/null
}'
file=$(write_job reporter 2 1 "$post
post '{\"trainerStatus\": {\"progressPercentage\": 42, \"estimatedRemainingSeconds\": 190, \"metrics\": [{\"name\": \"loss\", \"value\": \"0.25\"}]}}'
sleep 5
post '{\"trainerStatus\": {\"progressPercentage\": 60, \"estimatedRemainingSeconds\": 100}}'
sleep 300")
sed -i 's/^  name: reporter$/  name: reporter\n  annotations:\n    trainlet.io\/progress-timeout: 2s/' "$file"
"$CTL" apply -f "$file" >/dev/null

shows_42() { "$CTL" get trainjobs reporter | grep -qE 'Running +2 +2 +1 +42% +3m10s '; }
if ! wait_for 20 shows_42; then
  if "$CTL" logs reporter 2>/dev/null | grep -q NO_PROGRESS_ENV; then
    echo "SKIP: the agents give ranks no progress endpoint"; exit 77
  fi
  fail "42% never shown: $("$CTL" get trainjobs reporter); $("$CTL" describe trainjob reporter)"
fi
assert_contains "$("$CTL" describe trainjob reporter)" "loss" "describe's metrics"
json=$("$CTL" get trainjob reporter -o json)
python3 - "$json" <<'PY' || fail "-o json trainerStatus: $json"
import json, sys
ts = json.loads(sys.argv[1])["jobs"][0]["trainerStatus"]
assert ts["progressPercentage"] == 42, ts
assert ts["estimatedRemainingSeconds"] == 190, ts
assert ts["metrics"] == [{"name": "loss", "value": "0.25"}], ts
assert ts["lastUpdatedTime"].endswith("Z"), ts
PY
log "progress: 42% and 3m10s shown, metrics in describe, Kubeflow's names in -o json"

"$CTL" wait trainjob/reporter --for=condition=Stalled --timeout=20s >/dev/null \
  || fail "no Stalled during the 5 s pause: $("$CTL" describe trainjob reporter)"
wait_for 20 sh -c "'$CTL' get trainjobs reporter | grep -qE 'Running +2 +2 +1 +60% +1m40s '" \
  || fail "60% never shown: $("$CTL" get trainjobs reporter)"
stalled=$("$CTL" get trainjob reporter -o json | python3 -c '
import json, sys
job = json.load(sys.stdin)["jobs"][0]
print(" ".join(c["status"] + ":" + c["reason"] for c in job["conditions"] if c["type"] == "Stalled"))')
[ "$stalled" = "False:ProgressResumed" ] || fail "Stalled after the next post: '$stalled'"
"$CTL" delete trainjob reporter >/dev/null
log "progress pause: Stalled, then resumed by the next post"

# The SDK's helper from inside a rank, through the real agent's endpoint: trainlet's
# update_trainjob_status (python/trainlet/progress.py) posts three times on the connection it
# keeps open, and get trainjobs shows the last. The agent keeps that connection open between posts
# (one TLS handshake per rank, not per post).
sdk_py="import trainlet
codes = [trainlet.update_trainjob_status(progress_percentage=p, estimated_remaining_seconds=60,
                                         metrics={'accuracy': 0.5 + p / 1000})
         for p in (10, 20, 77)]
kept = [c.sock is not None for c in trainlet.progress._connections.values()]
print('SDK_CODES', *codes, 'kept', kept, flush=True)"
file=$(write_job sdk-reporter 2 1 "PYTHONPATH='$TRAINLET_SOURCE_DIR/python' /usr/bin/python3 -c \"$sdk_py\"
sleep 300")
"$CTL" apply -f "$file" >/dev/null
wait_for 30 sh -c "'$CTL' get trainjobs sdk-reporter | grep -qE 'Running +2 +2 +1 +77% +1m0s '" \
  || fail "77% from the SDK never shown: $("$CTL" get trainjobs sdk-reporter); $("$CTL" logs sdk-reporter 2>&1 | tail -20)"
json=$("$CTL" get trainjob sdk-reporter -o json)
python3 - "$json" <<'PY' || fail "-o json trainerStatus from the SDK: $json"
import json, sys
ts = json.loads(sys.argv[1])["jobs"][0]["trainerStatus"]
assert ts["progressPercentage"] == 77, ts
assert ts["metrics"] == [{"name": "accuracy", "value": "0.577"}], ts
PY
wait_for 10 sh -c "'$CTL' logs sdk-reporter 2>/dev/null | grep -c 'SDK_CODES 200 200 200 kept \\[True\\]' | grep -qx 2" \
  || fail "the SDK's posts were not all 200 on one kept connection on both ranks: $("$CTL" logs sdk-reporter 2>&1 | tail -20)"
"$CTL" delete trainjob sdk-reporter >/dev/null
log "progress from trainlet.update_trainjob_status through the agent: 77% shown, both ranks 200 on one connection each"
