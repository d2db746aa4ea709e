#!/usr/bin/env bash
# Bad files get clear errors and store nothing; garbage on the wire is dropped and counted, and
# neither daemon crashes.
source "$(dirname "$0")/lib.sh"

start_cluster 1 --slots 2
no_jobs() { [ -z "$("$CTL" get trainjobs -o name)" ] || fail "something was stored: $("$CTL" get trainjobs)"; }

# Malformed YAML: the error gives the line.
printf 'apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata: {name: x\nspec: [\n' > "$WORK/bad.yaml"
if "$CTL" apply -f "$WORK/bad.yaml" 2> "$WORK/err"; then fail "malformed YAML accepted"; fi
assert_contains "$(cat "$WORK/err")" "line" "malformed YAML error"
no_jobs

# An unknown runtime.
job=$(write_job orphan 1 1 'true')
sed -i 's/name: plain/name: no-such-runtime/' "$job"
if "$CTL" apply -f "$job" 2> "$WORK/err"; then fail "unknown runtime accepted"; fi
assert_contains "$(cat "$WORK/err")" "spec.runtimeRef" "unknown runtime error"
assert_contains "$(cat "$WORK/err")" "no-such-runtime" "unknown runtime error"
no_jobs

# A field invalid under the CRD schema; and a file whose second document is bad stores nothing.
job=$(write_job typed 1 1 'true')
sed -i 's/numNodes: 1/numNodes: "three"/' "$job"
if "$CTL" apply -f "$job" 2> "$WORK/err"; then fail "numNodes: three accepted"; fi
assert_contains "$(cat "$WORK/err")" "spec.trainer.numNodes" "schema error path"
good=$(write_job good 1 1 'true')
{ cat "$good"; echo "---"; cat "$job"; } > "$WORK/mixed.yaml"
if "$CTL" apply -f "$WORK/mixed.yaml" 2>/dev/null; then fail "a file with one bad document was accepted"; fi
no_jobs
log "bad files refused, nothing stored"

# Files that cannot be applied are refused with what is wrong with them, not silently and not
# with "did not answer" (issue 19): empty, only comments, too large, not UTF-8.
: > "$WORK/empty.yaml"
if "$CTL" apply -f "$WORK/empty.yaml" 2> "$WORK/err"; then fail "an empty file exited 0"; fi
assert_contains "$(cat "$WORK/err")" "-f $WORK/empty.yaml: the file is empty: nothing to apply" "empty file"
if "$CTL" apply -f - < /dev/null 2> "$WORK/err"; then fail "empty stdin exited 0"; fi
assert_contains "$(cat "$WORK/err")" "-f -: stdin is empty: nothing to apply" "empty stdin"
printf '# nothing here\n---\n# nor here\n' > "$WORK/comments.yaml"
if "$CTL" apply -f "$WORK/comments.yaml" 2> "$WORK/err"; then fail "a file of comments exited 0"; fi
assert_contains "$(cat "$WORK/err")" "$WORK/comments.yaml: holds nothing to apply" "comments only"
yes '# padding padding padding padding padding padding padding padding' | head -c 52428800 \
  > "$WORK/big.yaml" || true
started=$SECONDS
if timeout 14 "$CTL" apply -f "$WORK/big.yaml" 2> "$WORK/err"; then fail "a 50 MB file was accepted"; fi
assert_contains "$(cat "$WORK/err")" "-f $WORK/big.yaml: 52428800 bytes, more than the" "big file"
[ $((SECONDS - started)) -lt 5 ] || fail "the size check took $((SECONDS - started)) s"
rm -f "$WORK/big.yaml"
printf 'apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata: {name: caf\xe9}\n' \
  > "$WORK/latin1.yaml"
if timeout 14 "$CTL" apply -f "$WORK/latin1.yaml" 2> "$WORK/err"; then fail "latin-1 accepted"; fi
assert_contains "$(cat "$WORK/err")" "-f $WORK/latin1.yaml: not UTF-8 text: byte 0xe9 at line 3, column 21" "not UTF-8"
no_jobs
log "empty, comment-only, 50 MB and non-UTF-8 files refused with what is wrong"

# Garbage on the wire, from enrolled keys on both endpoints, and raw bytes without CURVE.
operator_endpoint=$(awk '/^coordinator:/ {print $2}' "$TRAINLET_HOME/config.yaml")
agent_endpoint=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["agent_endpoint"])' \
  "$TRAINLET_HOME/coordinator/endpoints.json")
"$TRAINLET_BIN/wire_garbage" "$operator_endpoint" "$TRAINLET_HOME/keys/coordinator.key.pub" \
  "$TRAINLET_HOME/keys/operator.key" 300
"$TRAINLET_BIN/wire_garbage" "$agent_endpoint" "$TRAINLET_HOME/keys/coordinator.key.pub" \
  "$TRAINLET_HOME/keys/node-1.key" 300
for ep in "$operator_endpoint" "$agent_endpoint"; do
  port=${ep##*:}
  python3 - "$port" <<'PY'
import os, socket, sys
for size in (1, 10, 4096, 65536):
    s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=2)
    try:
        s.sendall(os.urandom(size))
    except OSError:
        pass  # the daemon hung up on us: fine
    s.close()
PY
done
sleep 0.5
for f in "$TRAINLET_HOME"/pids/*.pid; do
  pid=$(awk '{print $1}' "$f")
  kill -0 "$pid" 2>/dev/null || fail "$(basename "$f" .pid) died after garbage"
done
grep -q "dropped" "$TRAINLET_HOME/logs/coordinator.log" || fail "drops were not logged"
[ -z "$(job_pids evil)" ] || fail "a garbage launch plan started something"
# Still serving: the node is Ready and a job runs to completion.
"$CTL" get nodes | grep -q "node-1 *Ready" || fail "node-1 not Ready after garbage"
"$CTL" apply -f "$good" >/dev/null
"$CTL" wait trainjob/good --for=condition=Complete --timeout=30s >/dev/null || fail "job after garbage"
log "garbage dropped, daemons alive and serving"

# -o: a format a command does not write is refused by the flag's name, before anything is sent;
# the ones it takes give one document a script can read.
for cmd in "apply -f $good -o yaml" "get trainjobs -o xml" "describe trainjob good -o wide"; do
  # shellcheck disable=SC2086  # the command's words
  if "$CTL" $cmd > "$WORK/out" 2> "$WORK/err"; then fail "$cmd: accepted"; fi
  assert_contains "$(cat "$WORK/err")" "--output" "$cmd"
  [ ! -s "$WORK/out" ] || fail "$cmd: printed $(cat "$WORK/out")"
done
"$CTL" apply -f "$good" -o json | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["unchanged"] == ["trainjob/good"], d' \
  || fail "apply -o json"
"$CTL" describe trainjob good -o json | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["name"] == "good" and d["jobPhase"] == "JOB_PHASE_SUCCEEDED", d' \
  || fail "describe trainjob -o json"
"$CTL" describe trainjob good -o yaml | grep -q "^name: good$" || fail "describe trainjob -o yaml"
log "-o: unknown formats refused by the flag, json and yaml readable"

# keys create: a name that could split an allowlist line or leave --dir is refused by the flag,
# and nothing is written or enrolled.
allow="$WORK/names.allow"
: > "$allow"
for bad in $'eve\nroot' '../evil' 'a b' '' '-x'; do
  if "$CTL" keys create --role operator --name "$bad" --dir "$WORK/named" --allowlist "$allow" \
      > "$WORK/out" 2> "$WORK/err"; then fail "keys create --name '$bad': accepted"; fi
  assert_contains "$(cat "$WORK/err")" "--name" "keys create --name '$bad'"
done
[ ! -s "$allow" ] || fail "a refused name was enrolled: $(cat "$allow")"
[ -z "$(find "$WORK" -maxdepth 2 -name '*.key' 2>/dev/null)" ] || fail "a refused name wrote a key: $(find "$WORK" -name '*.key')"
"$CTL" keys create --role operator --name carol.smith_2 --dir "$WORK/named" --allowlist "$allow" >/dev/null ||
  fail "a good name was refused"
[ "$(awk '{print $2}' "$allow")" = carol.smith_2 ] || fail "the allowlist holds: $(cat "$allow")"
log "keys create: bad names refused by --name, nothing written"

# An error found past the parser names its document too: a file of two jobs says which one.
{ cat "$(write_job named-aa 1 1 'true')"; echo '---'; cat "$(write_job named-bb 1 5000 'true')"; } > "$WORK/two.yaml"
if "$CTL" apply -f "$WORK/two.yaml" > /dev/null 2> "$WORK/err"; then fail "5000 procs per node accepted"; fi
assert_contains "$(cat "$WORK/err")" "TrainJob/named-bb: spec.trainer.numProcPerNode" "the bad document's name"
if "$CTL" get trainjob named-aa >/dev/null 2>&1; then fail "the good document of a refused file was stored"; fi
log "errors past the parser name their document"

# logs --rank: a bad rank is refused by the flag, with a range a person can read.
for bad in -1 abc 99999999999; do
  if "$CTL" logs good --rank "$bad" > /dev/null 2> "$WORK/err"; then fail "logs --rank $bad: accepted"; fi
  assert_contains "$(cat "$WORK/err")" "--rank: Value $bad not in range 0 to 2147483647" "logs --rank $bad"
done
log "logs --rank: bad ranks refused by the flag"
echo "PASS bad_input_test"
