#!/usr/bin/env bash
# Issue 19, "Ranks and secrets": ranks run as an unprivileged user, and their per-attempt secrets
# come through files only that user reads.
#
# node-1 runs ranks as the agent's user (root); node-2's agent has run_as: nobody. A rank on
# node-2 runs as nobody, finds no secret in its env but a 0400 token file it can read, and cannot
# open node-2's agent key, the token file of a root job on node-1, or that job's
# /proc/<pid>/environ. A job's securityContext.runAsUser overrides run_as (nobody on node-1);
# a uid that does not exist, root asked on a run_as node, a non-root agent asked to switch, and a
# work dir the user cannot reach are refused with the field named. Needs root: it exits 77
# (skipped) otherwise.
source "$(dirname "$0")/lib.sh"

if [ "$(id -u)" != 0 ]; then
  echo "SKIP: run_as needs root (this test switches ranks to the user nobody)"
  exit 77
fi
NOBODY=$(id -u nobody 2>/dev/null) || { echo "SKIP: no user nobody on this machine"; exit 77; }
GHOST=3999999
if getent passwd "$GHOST" >/dev/null; then fail "uid $GHOST exists here; pick another"; fi

# 1. An agent that is not root cannot be asked to switch users: it refuses to start, naming run_as.
if setpriv --reuid="$NOBODY" --regid="$NOBODY" --clear-groups "$TRAINLET_BIN/trainlet-agent" \
    --run-as root --name x --address 127.0.0.1 --coordinator tcp://127.0.0.1:1 \
    --coordinator-key /etc/hostname --key /etc/hostname --state-dir /tmp > "$WORK/nr.out" 2>&1; then
  fail "a non-root agent started with run_as: root"
fi
assert_contains "$(cat "$WORK/nr.out")" "run_as: the agent runs as uid $NOBODY, not root" "non-root agent"
log "a non-root agent asked to switch users refuses to start"

start_cluster 2 --labels role=root --labels role=nobody

# node-2 again, with run_as: nobody (its own flags, plus --run-as).
registrations() { grep -c "registered with" "$TRAINLET_HOME/logs/node-2.log" || true; }
before=$(registrations)
A2=$(awk '{print $1}' "$TRAINLET_HOME/pids/node-2.pid")
mapfile -d '' A2_ARGS < "/proc/$A2/cmdline"
kill -TERM "$A2"
wait_for 20 sh -c "! kill -0 $A2" || fail "node-2's agent did not stop"
setsid "${A2_ARGS[@]}" --run-as nobody >> "$TRAINLET_HOME/logs/node-2.log" 2>&1 < /dev/null &
A2=$!
echo "$A2 $(awk '{print $22}' "/proc/$A2/stat")" > "$TRAINLET_HOME/pids/node-2.pid"
registered_again() { [ "$(registrations)" -gt "$before" ]; }
wait_for 30 registered_again || fail "node-2 did not register again with run_as"
wait_for 30 sh -c "'$CTL' get nodes | grep -Eq '^node-2 +Ready'" || fail "node-2 not Ready"
log "node-2 runs ranks as nobody"

# job NAME ROLE SCRIPT [SECURITY-CONTEXT]: a 1-node TrainJob on its own runtime, placed on the
# node labelled role=ROLE, its container's securityContext set when given.
job() {
  local name=$1 role=$2 script=$3 sc=${4:-} file="$WORK/$1.yaml"
  {
    printf 'apiVersion: trainer.kubeflow.org/v1alpha1\nkind: ClusterTrainingRuntime\n'
    printf 'metadata:\n  name: rt-%s\nspec:\n  template:\n    spec:\n      replicatedJobs:\n' "$name"
    printf '        - name: node\n          template:\n            spec:\n              template:\n'
    printf '                spec:\n                  nodeSelector: {role: %s}\n' "$role"
    printf '                  containers:\n                    - name: node\n'
    printf '                      command: ["/bin/true"]\n'
    [ -n "$sc" ] && printf '                      securityContext: %s\n' "$sc"
    printf -- '---\napiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\n'
    printf 'metadata:\n  name: %s\nspec:\n  runtimeRef:\n    name: rt-%s\n  trainer:\n' "$name" "$name"
    printf '    numNodes: 1\n    numProcPerNode: 1\n'
    printf '    command:\n      - /bin/sh\n      - -c\n      - |\n'
    printf '%s\n' "$script" | sed 's/^/        /'
  } > "$file"
  "$CTL" apply -f "$file" >/dev/null
}
ended() { "$CTL" get trainjob "$1" | grep -Eq ' (Succeeded|Failed) '; }
wait_failed_with() {  # JOB TEXT
  "$CTL" wait "trainjob/$1" --for=condition=Failed --timeout=60s >/dev/null || fail "$1 did not fail"
  assert_contains "$("$CTL" describe trainjob "$1")" "$2" "$1's refusal"
}

# 2. A work dir the user cannot reach: the test's temp dir is 0700, above the agent's state dir.
job blocked nobody 'id -u'
wait_failed_with blocked "run_as: uid $NOBODY cannot reach its work dir"
assert_contains "$("$CTL" describe trainjob blocked)" "$WORK (mode 0700" "the dir named"
log "a work dir nobody cannot reach is refused, naming $WORK"
chmod o+x "$WORK" "$TRAINLET_HOME" "$TRAINLET_HOME/agents"

# 3. A root job on node-1: its token is in a 0400 file, not in its env.
job rootjob root 'sleep 300'
wait_for 60 sh -c "'$CTL' get trainjobs rootjob | grep -q Running" || fail "rootjob never Running"
ROOT_PID=$(job_pids rootjob | awk 'NR == 1')
[ -n "$ROOT_PID" ] || fail "rootjob's rank not found"
root_env=$(tr '\0' '\n' < "/proc/$ROOT_PID/environ")
if grep -q '^TRAINLET_RENDEZVOUS_TOKEN=' <<<"$root_env"; then fail "the token is in rootjob's env"; fi
ROOT_TOKEN=$(sed -n 's/^TRAINLET_RENDEZVOUS_TOKEN_FILE=//p' <<<"$root_env")
[ -n "$ROOT_TOKEN" ] || fail "rootjob has no TRAINLET_RENDEZVOUS_TOKEN_FILE: $root_env"
[ "$(stat -c %a "$ROOT_TOKEN")" = 400 ] || fail "rootjob's token file is not 0400"
[ -s "$ROOT_TOKEN" ] || fail "rootjob's token file is empty"
log "rootjob's token is in $ROOT_TOKEN (0400), not in its env"

# 4. A rank on node-2 runs as nobody and sees only its own secret.
AGENT_KEY="$TRAINLET_HOME/keys/node-2.key"
[ -r "$AGENT_KEY" ] || fail "no agent key at $AGENT_KEY"
job probe nobody "echo uid=\$(id -u)
echo token_env=\${TRAINLET_RENDEZVOUS_TOKEN:-none}
stat -c 'token_mode=%a token_owner=%u' \"\$TRAINLET_RENDEZVOUS_TOKEN_FILE\"
[ -s \"\$TRAINLET_RENDEZVOUS_TOKEN_FILE\" ] && cat \"\$TRAINLET_RENDEZVOUS_TOKEN_FILE\" >/dev/null && echo token_readable
cat '$AGENT_KEY' >/dev/null 2>&1 && echo agent_key_READ || echo agent_key_denied
cat '$ROOT_TOKEN' >/dev/null 2>&1 && echo other_token_READ || echo other_token_denied
cat /proc/$ROOT_PID/environ >/dev/null 2>&1 && echo environ_READ || echo environ_denied
touch \"\$TRAINLET_WORK_DIR/mine\" && echo workdir_writable
touch \"\$TRAINLET_DATASET_DIR/mine\" && echo dataset_writable"
"$CTL" wait trainjob/probe --for=condition=Complete --timeout=60s >/dev/null ||
  fail "probe did not succeed: $("$CTL" describe trainjob probe) $("$CTL" logs probe 2>&1)"
out=$("$CTL" logs probe)
for want in "uid=$NOBODY" token_env=none "token_mode=400 token_owner=$NOBODY" token_readable \
    agent_key_denied other_token_denied environ_denied workdir_writable dataset_writable; do
  assert_contains "$out" "$want" "probe's rank"
done
log "the rank ran as nobody: no secret in its env, its 0400 token file readable, the agent key, another job's token and environ not"

# 5. securityContext.runAsUser overrides run_as: nobody on node-1, whose agent runs ranks as root.
job override root 'id -u' "{runAsUser: $NOBODY}"
"$CTL" wait trainjob/override --for=condition=Complete --timeout=60s >/dev/null ||
  fail "override did not succeed: $("$CTL" describe trainjob override)"
assert_contains "$("$CTL" logs override)" "$NOBODY" "override's uid"
log "securityContext.runAsUser: $NOBODY ran as nobody on a root agent"

# 6. Refusals, each naming the field.
job ghost nobody 'id -u' "{runAsUser: $GHOST}"
wait_failed_with ghost "securityContext.runAsUser: uid $GHOST does not exist on this node"
job asroot nobody 'id -u' "{runAsUser: 0}"
wait_failed_with asroot "securityContext.runAsUser: 0 (root) is refused"
log "a uid that does not exist and root on a run_as node are refused"

# 7. What trainlet promises ranks reaches a run_as rank, and that user only: the progress
# endpoint's CA file and token (copies, 0400, the rank's) and the node cache (a 0700 dir of its
# own). A progress post from the rank is shown.
command -v curl >/dev/null || fail "curl is needed for the progress post"
job poster nobody "stat -c 'ca=%a:%u' \"\$KUBEFLOW_TRAINER_SERVER_CA_CERT\"
stat -c 'token=%a:%u' \"\$KUBEFLOW_TRAINER_SERVER_TOKEN\"
stat -c 'cache=%a:%u' \"\$TRAINLET_CACHE_DIR\"
touch \"\$TRAINLET_CACHE_DIR/mine\" && echo cache_writable
ls \"\$TRAINLET_CACHE_DIR/..\" >/dev/null 2>&1 && echo cache_LISTED || echo cache_unlisted
curl -sS --fail --cacert \"\$KUBEFLOW_TRAINER_SERVER_CA_CERT\" \
  -H \"Authorization: Bearer \$(cat \"\$KUBEFLOW_TRAINER_SERVER_TOKEN\")\" \
  -H 'Content-Type: application/json' -d '{\"trainerStatus\": {\"progressPercentage\": 33}}' \
  \"\$KUBEFLOW_TRAINER_SERVER_URL\" >/dev/null && echo posted
sleep 300"
wait_for 30 sh -c "'$CTL' get trainjobs poster | grep -qE ' 33% '" ||
  fail "33% from a run_as rank never shown: $("$CTL" get trainjobs poster); $("$CTL" logs poster 2>&1)"
out=$("$CTL" logs poster)
for want in "ca=400:$NOBODY" "token=400:$NOBODY" "cache=700:$NOBODY" cache_writable \
    cache_unlisted posted; do
  assert_contains "$out" "$want" "poster's rank"
done
"$CTL" delete trainjob poster >/dev/null
log "a run_as rank posted progress with its own 0400 CA and token copies, and has its own node cache dir"
