#!/usr/bin/env bash
# Each rank's log is capped (issue 19, defect 9): a rank that writes 50 MiB under a 1 MiB cap
# (agent key rank_log_max_mb) keeps the node's disk use bounded, the log is cut by copy-truncate
# into <log>.1 with a note where it was cut, and `trainletctl logs` still shows the tail and the
# note. The 1 GB run is tests/soak/rank_log_cap_soak.sh, which sets CAP_MB and WRITE_MB.
source "$(dirname "$0")/lib.sh"
CAP_MB=${CAP_MB:-1}
WRITE_MB=${WRITE_MB:-50}
# Each file may pass the cap by what the rank writes between two checks (100 ms, about 2 MiB
# here); while a rotation copies, the log, <log>.1 and the copy exist at once.
file_max=$(((CAP_MB + 3) << 20))
peak_max=$((3 * file_max))

start_cluster 1 --slots 2
# The agent again, with the cap (no job runs yet).
pidfile="$TRAINLET_HOME/pids/node-1.pid"
apid=$(awk '{print $1}' "$pidfile")
mapfile -d '' aargs < "/proc/$apid/cmdline"
for i in "${!aargs[@]}"; do
  [ "${aargs[$i]}" = --metrics-address ] && aargs[$((i + 1))]=127.0.0.1:0
done
kill -TERM "$apid"
wait_for 15 sh -c "! kill -0 $apid 2>/dev/null" || fail "the agent did not exit on SIGTERM"
before=$(grep -c "registered with" "$TRAINLET_HOME/logs/node-1.log" || true)
setsid "${aargs[@]}" --rank-log-max-mb "$CAP_MB" >> "$TRAINLET_HOME/logs/node-1.log" 2>&1 < /dev/null &
apid=$!
disown "$apid"
echo "$apid $(awk '{print $22}' "/proc/$apid/stat")" > "$pidfile"  # `local down` stops it
wait_for 20 sh -c "[ \$(grep -c 'registered with' '$TRAINLET_HOME/logs/node-1.log') -gt $before ]" ||
  fail "the restarted agent did not register"

# WRITE_MB lines of 1 MiB, paced (about 20 MiB/s), then a marker. The pause before the marker
# lets the step cut the over-cap log first (it checks every 100 ms): a cut that fell between the
# marker and the rank's exit would move the marker into <log>.1 with the rest, which is the cap
# working, and `logs` would show only the note (this failed about one run in ten under -j2).
"$CTL" apply -f "$(write_job chatty 1 1 "i=0
while [ \$i -lt $WRITE_MB ]; do head -c 1048575 /dev/zero | tr '\\0' x; echo; i=\$((i + 1)); sleep 0.05; done
sleep 0.4
echo chatty-last-line")" >/dev/null
logdir="$TRAINLET_HOME/agents/node-1/logs/chatty"
peak=0
for _ in $(seq $((100 + WRITE_MB * 4))); do
  if [ -d "$logdir" ]; then
    used=$(du -sb "$logdir" | awk '{print $1}')
    [ "$used" -gt "$peak" ] && peak=$used
  fi
  "$CTL" get trainjobs chatty | grep -q Succeeded && break
  sleep 0.1
done
"$CTL" get trainjobs chatty | grep -q Succeeded || fail "chatty did not succeed: $("$CTL" describe trainjob chatty)"
log="$(find "$logdir" -name 'rank-0.log' | head -1)"
[ -n "$log" ] || fail "no rank-0.log under $logdir"
[ -f "$log.1" ] || fail "the log was never rotated: $(ls -la "$(dirname "$log")")"
size=$(stat -c %s "$log"); size1=$(stat -c %s "$log.1")
log "peak disk use ${peak} bytes; log ${size}, log.1 ${size1} ($WRITE_MB MiB written, cap $CAP_MB MiB)"
[ "$size" -le "$file_max" ] || fail "the log holds $size bytes past a $CAP_MB MiB cap"
[ "$size1" -le "$file_max" ] || fail "the rotated log holds $size1 bytes"
[ "$peak" -le "$peak_max" ] || fail "disk use peaked at $peak bytes for a $CAP_MB MiB cap"
out=$("$CTL" logs chatty)
assert_contains "$out" "[trainlet] log rotated at " "logs"
assert_contains "$out" "earlier output in rank-0.log.1" "logs"
assert_contains "$out" "chatty-last-line" "logs"
echo "PASS rank_log_cap_test"
