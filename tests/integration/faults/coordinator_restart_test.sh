#!/usr/bin/env bash
# The coordinator is killed with SIGKILL in the middle of a 3-node job and restarted on the same
# endpoints: the job keeps running, the agents re-register with what they run, the exit statuses
# that happened during the outage are delivered, and the job completes. A job submitted during the
# outage fails loudly at the client.
source "$(dirname "$0")/../lib.sh"

start_cluster 3 --slots 2
remember_coordinator  # its command line, with the ports it bound in place of port 0

# Ranks that outlive the outage: some exit while the coordinator is down, some after.
job=$(write_job survivor 3 2 'sleep $((2 + TRAINLET_RANK % 2 * 4)); echo "rank $TRAINLET_RANK done"')
"$CTL" apply -f "$job" >/dev/null
wait_for 20 sh -c "'$CTL' get trainjobs survivor | grep -q Running" || fail "survivor never Running"
kill -9 "$COORD_PID"
log "coordinator killed (pid $COORD_PID)"

# Submitting during the outage fails at the client (after its request timeout, 15 s by default;
# 2 s here); nothing is silently dropped.
late=$(write_job late 1 1 'true')
if timeout 30 "$CTL" --request-timeout 2s apply -f "$late" 2> "$WORK/err"; then
  fail "apply succeeded with no coordinator"
fi
assert_contains "$(cat "$WORK/err")" "did not answer" "apply during the outage"
# Ranks 0, 2 and 4 exit (at 2 s) while the coordinator is down; 1, 3 and 5 (at 6 s) mostly after.
ranks_alive() {
  local p
  for p in $(job_pids survivor); do
    { tr '\0' '\n' < "/proc/$p/environ"; } 2>/dev/null | sed -n 's/^TRAINLET_RANK=//p'
  done | sort -u | tr '\n' ' '
}
even_ranks_done() { ! grep -qE '(^| )[024] ' <<<"$(ranks_alive)"; }
wait_for 20 even_ranks_done || fail "ranks $(ranks_alive)still run 20 s into the outage"

restart_coordinator

"$CTL" wait trainjob/survivor --for=condition=Complete --timeout=60s \
  || fail "survivor did not complete after the restart: $("$CTL" describe trainjob survivor)"
d=$("$CTL" describe trainjob survivor)
[ "$(grep -cE '^  [0-5] +node-[0-9] +[0-9] +Succeeded ' <<<"$d")" = 6 ] || fail "every rank must be Succeeded: $d"
grep -q "Attempt: *1 " <<<"$d" || fail "the job must not have restarted: $d"
for r in 0 1 2 3 4 5; do
  assert_contains "$("$CTL" logs survivor --rank $r)" "rank $r done" "rank $r output"
done
# The job submitted during the outage was not stored behind the client's back.
if "$CTL" get trainjobs late >/dev/null 2>&1; then fail "the refused job exists"; fi
log "job completed across the restart, attempt 1, all exit codes delivered"
echo "PASS coordinator_restart_test"
