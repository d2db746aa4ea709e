#!/usr/bin/env bash
# `local down` signals a pid of its pid files only while that pid is still the process `local up`
# started: the start time written beside it must match. A pid reused by another process (here a
# `sleep` whose start time differs from the file's) is left alone; the matching one is stopped.
# Needs no cluster; every process it starts is stopped by pid on the way out.
set -euo pipefail
: "${TRAINLET_BIN:?TRAINLET_BIN must point at the bin directory of the build}"
fail() { echo "FAIL: $*" >&2; exit 1; }
dir=$(mktemp -d /tmp/trainlet-down-pids.XXXXXX)
sleep 300 & reused=$!
sleep 300 & ours=$!
trap 'kill "$reused" "$ours" 2>/dev/null || true; rm -rf "$dir"' EXIT
mkdir "$dir/pids"
start_time() { awk '{print $22}' "/proc/$1/stat"; }  # sleep's comm has no space
echo "$reused $(($(start_time "$reused") + 1))" > "$dir/pids/node-1.pid"
echo "$ours $(start_time "$ours")" > "$dir/pids/node-2.pid"
echo "999999999 1" > "$dir/pids/node-3.pid"  # long gone
"$TRAINLET_BIN/trainletctl" local down --dir "$dir" --timeout 5 2> "$dir/err" || fail "local down: $(cat "$dir/err")"
kill -0 "$reused" 2>/dev/null || fail "a reused pid was signalled"
grep -q "stopped node-2 (pid $ours)" "$dir/err" || fail "the matching pid was not stopped: $(cat "$dir/err")"
if grep -q "pid $reused" "$dir/err"; then fail "local down named the reused pid: $(cat "$dir/err")"; fi
wait "$ours" 2>/dev/null || true  # reaped: killed by SIGUSR2
if kill -0 "$ours" 2>/dev/null; then fail "the matching pid is still running"; fi
echo "PASS local_down_pids_test"
