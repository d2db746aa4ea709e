#!/usr/bin/env bash
# Ranks of two users in one job on one node at the same time (docs/operations.md, "Ranks of more
# than one user"): a runtime whose `node` container runs as nobody and whose `sidecar` replicated
# job (no dependsOn: it runs beside the trainer) runs as daemon, both pods with
# securityContext.fsGroup. Each rank writes a file into the job's work dir, waits for the other's,
# reads its own rendezvous token file, and must NOT be able to read the other user's token file or
# list the secrets dir. The work dir is the fsGroup's (setgid, group rw); each rank has the fsGroup
# as a supplementary group. Without fsGroup the second user's ranks are refused, naming the field;
# a replicated job of another user that runs and exits before the trainer (dependsOn Complete)
# still takes the work dir over without one. On a build before the fix the concurrent job failed:
# the second user's ranks took the work dir and the secrets dir (chown, 0700) from the first.
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
# makes node wait for the sidecar to Complete (sequential users).
job() {
  local name=$1 fsg=$2 dep=${3:-} file="$WORK/$1.yaml" podsc="" tries=300
  [ -n "$fsg" ] && podsc="securityContext: {fsGroup: $fsg}"
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
                      securityContext: {runAsUser: $A}
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

# 2. The same without fsGroup: refused, naming the field.
job alone ""
"$CTL" wait trainjob/alone --for=condition=Failed --timeout=90s >/dev/null ||
  fail "alone did not fail: $(why alone)"
assert_contains "$(why alone)" "securityContext.fsGroup" "the refusal"
log "two users at once without fsGroup are refused, naming securityContext.fsGroup"

# 3. Sequential users without fsGroup: the trainer takes the work dir over once the sidecar is done.
job seq "" yes
"$CTL" wait trainjob/seq --for=condition=Complete --timeout=120s >/dev/null ||
  fail "seq did not complete: $(why seq)"
assert_contains "$("$CTL" logs seq --step sidecar)" own_token_b "the sequential sidecar"
assert_contains "$("$CTL" logs seq)" own_token_a "the sequential trainer"
log "a replicated job of another user before the trainer (dependsOn Complete) still works without fsGroup"
echo "PASS run_as_users_test"
