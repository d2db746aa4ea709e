#!/usr/bin/env bash
# A full and a read-only state dir: the coordinator refuses new work with a clear error (naming
# the state dir, "no space left" / "read-only"), stores nothing half, and once the disk is
# healthy again a restarted coordinator has every old job intact (PRAGMA integrity_check ok).
# Last, the state dir turns read-only under a running coordinator: apply is refused, then taken.
# Needs root to mount a 2 MiB tmpfs as the coordinator's state dir; skipped otherwise.
source "$(dirname "$0")/../lib.sh"

STATE="$TRAINLET_HOME/coordinator"
mkdir -p "$STATE"
if [ "$(id -u)" != 0 ] || ! mount -t tmpfs -o size=2M,mode=0700 tmpfs "$STATE" 2>/dev/null; then
  echo "SKIP disk_full_test: mounting a tmpfs needs root"
  exit 77
fi
# Before lib.sh's cleanup removes $WORK: stop the cluster, then unmount.
disk_cleanup() {
  local rc=$?
  if [ -d "$TRAINLET_HOME/pids" ]; then
    "$CTL" local down --dir "$TRAINLET_HOME" --timeout 10 >/dev/null 2>&1 || true
  fi
  # The tmpfs, and the read-only bind over it when a failure left one (step 4).
  for _ in 1 2; do
    mountpoint -q "$STATE" || break
    umount "$STATE" 2>/dev/null || umount -l "$STATE" 2>/dev/null || true
  done
  (exit $rc)
  cleanup
}
trap disk_cleanup EXIT

job_field() {
  "$CTL" get trainjob "$1" -o json | python3 -c '
import json, sys
doc = json.load(sys.stdin)
job = doc["jobs"][0] if "jobs" in doc else doc
print(job.get(sys.argv[1], ""))' "$2"
}
integrity() { sqlite3 "file:$STATE/trainlet.db?mode=ro" "PRAGMA integrity_check;"; }

start_cluster 1 --slots 2
log "cluster up, state dir on a 2 MiB tmpfs"

# Jobs stored before the disk fills: one finished, one suspended.
"$CTL" apply -f "$(write_job done1 1 1 'echo done')" >/dev/null
"$CTL" wait trainjob/done1 --for=condition=Complete --timeout=30s >/dev/null || fail "done1"
kept=$(write_job kept 1 1 'exec sleep 300')
sed -i 's/^spec:$/spec:\n  suspend: true/' "$kept"
"$CTL" apply -f "$kept" >/dev/null
[ "$(job_field kept phase)" = Suspended ] || fail "kept: $(job_field kept phase)"

# A job that finishes while the disk is full: its status cannot be written then, stays in the
# coordinator's memory, and must be stored once there is room again.
"$CTL" apply -f "$(write_job during 1 1 'sleep 2; echo finished')" >/dev/null

# 1. Fill the disk.
dd if=/dev/zero of="$STATE/filler" bs=64k 2>/dev/null || true
[ "$(df --output=avail -B1 "$STATE" | tail -1)" -lt 65536 ] || fail "the tmpfs did not fill"
log "disk full"

new=$(write_job refused 1 1 'echo never')
if "$CTL" apply -f "$new" > "$WORK/apply.out" 2> "$WORK/apply.err"; then
  fail "apply on a full disk succeeded: $(cat "$WORK/apply.out")"
fi
err=$(cat "$WORK/apply.err")
assert_contains "$err" "state dir $STATE" "the error names the state dir"
assert_contains "$err" "no space left" "the error says why"
if "$CTL" get trainjob refused >/dev/null 2>&1; then fail "the refused job exists"; fi
# What is stored still answers, and a suspend flip (a write) is refused the same way.
[ "$(job_field done1 phase)" = Succeeded ] || fail "done1 after the disk filled"
if "$CTL" resume trainjob kept 2> "$WORK/resume.err"; then fail "resume on a full disk"; fi
assert_contains "$(cat "$WORK/resume.err")" "no space left" "resume on a full disk"
[ "$(job_field kept phase)" = Suspended ] || fail "a refused resume changed kept"
log "apply refused on a full disk: $err"
"$CTL" wait trainjob/during --for=condition=Complete --timeout=30s >/dev/null || fail "during"
sleep 1  # a loop iteration or two with the store refusing the write
grep -q "no space left on device" "$TRAINLET_HOME/logs/coordinator.log" ||
  log "note: the status write fit in the WAL's free room, so no write failed"

# 2. Free it, restart the coordinator: everything stored is intact.
rm -f "$STATE/filler"
"$CTL" local down --dir "$TRAINLET_HOME" --timeout 10 >/dev/null
[ "$(integrity)" = ok ] || fail "integrity_check after the full disk: $(integrity)"

# 3. A read-only state dir: the coordinator refuses to start, saying so.
mount -o remount,ro "$STATE" || fail "remount read-only"
K="$TRAINLET_HOME/keys"
if timeout 20 "$TRAINLET_BIN/trainlet-coordinator" --state-dir "$STATE" \
    --agent-listen tcp://127.0.0.1:0 --operator-listen tcp://127.0.0.1:0 \
    --exec-listen tcp://127.0.0.1:0 --metrics-address 127.0.0.1:0 --key "$K/coordinator.key" \
    --agent-allowlist "$K/agents.allow" --operator-allowlist "$K/operators.allow" \
    --endpoints-file "$WORK/ro-endpoints.json" > "$WORK/ro.log" 2>&1; then
  fail "a coordinator ran on a read-only state dir: $(tail -5 "$WORK/ro.log")"
fi
assert_contains "$(cat "$WORK/ro.log")" "$STATE" "the read-only error names the state dir"
grep -qi "read-only" "$WORK/ro.log" || fail "the error does not say read-only: $(tail -5 "$WORK/ro.log")"
mount -o remount,rw "$STATE" || fail "remount read-write"
log "read-only state dir refused"

start_cluster 1 --slots 2
[ "$(job_field done1 phase)" = Succeeded ] || fail "done1 after the restart: $(job_field done1 phase)"
[ "$(job_field kept phase)" = Suspended ] || fail "kept after the restart: $(job_field kept phase)"
[ "$(job_field during phase)" = Succeeded ] || fail "during after the restart: $(job_field during phase)"
if "$CTL" get trainjob refused >/dev/null 2>&1; then fail "the refused job appeared after restart"; fi
[ "$(integrity)" = ok ] || fail "integrity_check after the restart: $(integrity)"

# New work is accepted again.
"$CTL" apply -f "$new" >/dev/null || fail "apply after the disk was freed"
"$CTL" wait trainjob/refused --for=condition=Complete --timeout=30s >/dev/null || fail "refused job"
log "restart: old jobs intact, integrity ok, new work accepted"

# 4. The state dir's file system turns read-only under a running coordinator (as ext4 does
# after an error, errors=remount-ro). A read-only bind mount over the dir stands for it: the
# coordinator's open database still writes below it, but every check of the dir sees the file
# system read-only, and `apply` is refused before anything is stored.
mount --bind "$STATE" "$STATE" || fail "bind mount"
mount -o remount,bind,ro "$STATE" || fail "read-only bind mount"
ro_job=$(write_job ro-refused 1 1 'echo never')
if "$CTL" apply -f "$ro_job" > "$WORK/ro-apply.out" 2> "$WORK/ro-apply.err"; then
  fail "apply on a read-only state dir succeeded: $(cat "$WORK/ro-apply.out")"
fi
assert_contains "$(cat "$WORK/ro-apply.err")" "state dir $STATE" "the read-only error names the state dir"
assert_contains "$(cat "$WORK/ro-apply.err")" "read-only file system" "the error says read-only"
if "$CTL" get trainjob ro-refused >/dev/null 2>&1; then fail "the job refused on a read-only dir exists"; fi
umount "$STATE" || fail "unmount the read-only bind"
"$CTL" apply -f "$ro_job" >/dev/null || fail "apply once the dir is writable again"
log "apply refused while the state dir is read-only, accepted after"

echo "PASS disk_full_test"
