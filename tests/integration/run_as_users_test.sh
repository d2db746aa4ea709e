#!/usr/bin/env bash
# Ranks of two users in one job on one node at the same time (docs/operations.md, "Ranks of more
# than one user"): a runtime whose `node` container runs as nobody and whose `sidecar` replicated
# job (no dependsOn: it runs beside the trainer) runs as daemon, both pods with
# securityContext.fsGroup. Each rank writes a file into the job's work dir, waits for the other's,
# reads its own rendezvous token file, and must NOT be able to read the other user's token file or
# list the secrets dir. The work dir is the fsGroup's (setgid, group rw); each rank has the fsGroup
# as a supplementary group. Without fsGroup the job is refused at apply, naming the field (issue
# 14: before, it was placed and its attempt failed when the second user's rank started); a
# replicated job of another user that runs and exits before the trainer (dependsOn Complete)
# still takes the work dir over without one. A user the agent's run_as decides (no runAsUser) is
# checked on the node when the rank starts, the backstop. On a build before the first fix the
# concurrent job failed: the second user's ranks took the work dir and the secrets dir (chown,
# 0700) from the first.
# Needs root: it exits 77 (skipped) otherwise.
source "$(dirname "$0")/lib.sh"

if [ "$(id -u)" != 0 ]; then
  echo "SKIP: runAsUser needs root (this test switches ranks to nobody and daemon)"
  exit 77
fi
A=$(id -u nobody 2>/dev/null) || { echo "SKIP: no user nobody on this machine"; exit 77; }
B=$(id -u daemon 2>/dev/null) || { echo "SKIP: no user daemon on this machine"; exit 77; }
FSG=4242

start_cluster 1 --slots 4
chmod o+x "$WORK" "$TRAINLET_HOME" "$TRAINLET_HOME/agents"  # both users reach the work dir

# probe ME OTHER [TRIES]: what each rank runs. It leaves its token file's path and a file of its
# own in the work dir, waits (TRIES x 0.1 s, 30 s by default) for the other user's, and then says
# what it could do. It fails when it could not write its file or read its own token.
probe() {
  cat <<EOF
W=\$TRAINLET_WORK_DIR bad=0
echo "\$TRAINLET_RENDEZVOUS_TOKEN_FILE" > \$W/path-$1 && echo "hello from $1" > \$W/from-$1 && echo wrote_$1 || bad=2
for i in \$(seq ${3:-300}); do [ -s \$W/path-$2 ] && break; sleep 0.1; done
[ -e \$W/from-$2 ] && echo saw_$2
cat \$W/from-$2 >/dev/null 2>&1 && echo read_other_file
[ -s "\$TRAINLET_RENDEZVOUS_TOKEN_FILE" ] && cat "\$TRAINLET_RENDEZVOUS_TOKEN_FILE" >/dev/null && echo own_token_$1 || bad=3
cat "\$(cat \$W/path-$2 2>/dev/null)" >/dev/null 2>&1 && echo other_token_READ || echo other_token_denied
ls \$W/.trainlet-secrets >/dev/null 2>&1 && echo secrets_LISTED || echo secrets_unlisted
id -G | tr ' ' '\\n' | grep -qx $FSG && echo has_fsgroup
echo "uid_$1=\$(id -u) dir=\$(stat -c '%g:%a' \$W)"
exit \$bad
EOF
}

# job NAME FSGROUP [DEPENDS]: the runtime and its TrainJob; FSGROUP "" for none; DEPENDS "yes"
# makes node wait for the sidecar to Complete (sequential users). EXPECT_REFUSAL=1: the apply may
# fail (its output in $WORK/NAME.apply).
job() {
  local name=$1 fsg=$2 dep=${3:-} file="$WORK/$1.yaml" podsc="" tries=300 nodesc=""
  [ -n "$fsg" ] && podsc="securityContext: {fsGroup: $fsg}"
  # NODE_USER=none: the node container names no user (the agent's run_as decides).
  [ "${NODE_USER:-}" = none ] || nodesc="securityContext: {runAsUser: $A}"
  [ "$dep" = yes ] && tries=1
  {
    cat <<YAML
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainingRuntime
metadata:
  name: rt-$name
spec:
  template:
    spec:
      replicatedJobs:
        - name: sidecar
          template:
            spec:
              template:
                spec:
                  $podsc
                  containers:
                    - name: sidecar
                      image: busybox
                      securityContext: {runAsUser: $B}
                      command:
                        - /bin/sh
                        - -c
                        - |
$(probe b a "$tries" | sed 's/^/                          /')
        - name: node
YAML
    [ "$dep" = yes ] && printf '          dependsOn:\n            - name: sidecar\n              status: Complete\n'
    cat <<YAML
          template:
            spec:
              template:
                spec:
                  $podsc
                  containers:
                    - name: node
                      image: busybox
                      $nodesc
---
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: $name
spec:
  runtimeRef:
    kind: TrainingRuntime
    name: rt-$name
  trainer:
    numNodes: 1
    command:
      - /bin/sh
      - -c
      - |
$(probe a b "$tries" | sed 's/^/        /')
YAML
  } > "$file"
  [ "${EXPECT_REFUSAL:-}" = 1 ] && { "$CTL" apply -f "$file" > "$WORK/$name.apply" 2>&1; return; }
  "$CTL" apply -f "$file" > "$WORK/$name.apply" 2>&1 || fail "$name not applied: $(cat "$WORK/$name.apply")"
}
why() { echo "$("$CTL" describe trainjob "$1" 2>&1); $("$CTL" logs "$1" 2>&1); $("$CTL" logs "$1" --step sidecar 2>&1)"; }

# 1. Concurrent users sharing the work dir through fsGroup.
job shared "$FSG"
"$CTL" wait trainjob/shared --for=condition=Complete --timeout=90s >/dev/null ||
  fail "shared did not complete: $(why shared)"
a=$("$CTL" logs shared)
b=$("$CTL" logs shared --step sidecar)
for want in wrote_a saw_b read_other_file own_token_a other_token_denied secrets_unlisted \
    has_fsgroup "uid_a=$A dir=$FSG:3770"; do
  assert_contains "$a" "$want" "nobody's rank"
done
for want in wrote_b saw_a read_other_file own_token_b other_token_denied secrets_unlisted \
    has_fsgroup "uid_b=$B dir=$FSG:3770"; do
  assert_contains "$b" "$want" "daemon's rank"
done
log "nobody and daemon ran at once in one work dir (group $FSG, 3770: setgid and sticky), each read its own token and not the other's"

# 2. The same without fsGroup: both users are in the spec, and every replicated job runs on every
# node of the job, so they could never both start: refused at apply, naming the field, the two
# replicated jobs and their users, and nothing is created (on a build before, the job was placed
# and its attempt failed when the second user's rank started).
if EXPECT_REFUSAL=1 job alone ""; then
  fail "alone was applied; want a refusal naming securityContext.fsGroup: $(why alone)"
fi
refusal=$(cat "$WORK/alone.apply")
assert_contains "$refusal" "spec.template.spec.replicatedJobs[1].template.spec.template.spec.securityContext.fsGroup" "the refusal"
assert_contains "$refusal" "replicated jobs sidecar (runAsUser $B) and node (runAsUser $A) run at the same time" "the refusal"
if "$CTL" get trainjob alone >/dev/null 2>&1; then fail "the refused job exists: $(why alone)"; fi
# Its runtime alone is stored, as Kubeflow stores it, with a warning that says why.
sed '/^---$/,$d' "$WORK/alone.yaml" > "$WORK/alone-runtime.yaml"
rt_out=$("$CTL" apply -f "$WORK/alone-runtime.yaml" 2>&1) || fail "the runtime alone not applied: $rt_out"
assert_contains "$rt_out" "every TrainJob on this runtime is refused at apply" "the runtime's warning"
log "two users at once without fsGroup are refused at apply, naming securityContext.fsGroup"

# 3. Sequential users without fsGroup: the trainer takes the work dir over once the sidecar is done.
job seq "" yes
"$CTL" wait trainjob/seq --for=condition=Complete --timeout=120s >/dev/null ||
  fail "seq did not complete: $(why seq)"
assert_contains "$("$CTL" logs seq --step sidecar)" own_token_b "the sequential sidecar"
assert_contains "$("$CTL" logs seq)" own_token_a "the sequential trainer"
log "a replicated job of another user before the trainer (dependsOn Complete) still works without fsGroup"
# 4. A user only the node knows: node names no runAsUser, so its ranks run as the agent's run_as
# (nobody, on an agent started again with --run-as), beside the sidecar as daemon without
# fsGroup. The coordinator cannot know the clash, so the apply is accepted and the node's check
# stays the backstop: the attempt fails when the second user's rank starts, naming the field.
registrations() { grep -c "registered with" "$TRAINLET_HOME/logs/node-1.log" || true; }
before=$(registrations)
A1=$(awk '{print $1}' "$TRAINLET_HOME/pids/node-1.pid")
mapfile -d '' A1_ARGS < "/proc/$A1/cmdline"
kill -TERM "$A1"
wait_for 20 sh -c "! kill -0 $A1" || fail "node-1's agent did not stop"
setsid "${A1_ARGS[@]}" --run-as nobody >> "$TRAINLET_HOME/logs/node-1.log" 2>&1 < /dev/null &
A1=$!
echo "$A1 $(awk '{print $22}' "/proc/$A1/stat")" > "$TRAINLET_HOME/pids/node-1.pid"
registered_again() { [ "$(registrations)" -gt "$before" ]; }
wait_for 30 registered_again || fail "node-1 did not register again with run_as"
wait_for 30 sh -c "'$CTL' get nodes | grep -Eq '^node-1 +Ready'" || fail "node-1 not Ready"
NODE_USER=none job backstop ""
"$CTL" wait trainjob/backstop --for=condition=Failed --timeout=90s >/dev/null ||
  fail "backstop did not fail: $(why backstop)"
assert_contains "$(why backstop)" "securityContext.fsGroup: ranks of uid" "the node's refusal"
log "a user the agent's run_as decides is still checked on the node when the rank starts"
echo "PASS run_as_users_test"
