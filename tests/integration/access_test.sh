#!/usr/bin/env bash
# Who may do what (issue 14): two namespaces, two ClusterQueues in one cohort (a LocalQueue in each
# namespace), and four operator keys under a policy file next to the allowlists. A user of team-a
# cannot apply, delete, suspend or read logs in team-b but can read its status, nor apply queues;
# an admin can do all of it; a key the policy does not name is refused; the policy reloads
# without a restart; the jobs' events name the user who changed them.
source "$(dirname "$0")/lib.sh"

start_cluster 2 --slots 2
keys="$TRAINLET_HOME/keys"
endpoint=$(awk '/^coordinator:/ {print $2}' "$TRAINLET_HOME/config.yaml")

# user NAME: a key enrolled as NAME in operators.allow and a client home using it.
user() {
  "$CTL" keys create --role operator --name "$1" --dir "$WORK/users" \
    --allowlist "$keys/operators.allow" >/dev/null
  mkdir -p "$WORK/home-$1"
  printf 'coordinator: %s\ncoordinator_key: %s\nkey: %s\n' "$endpoint" \
    "$keys/coordinator.key.pub" "$WORK/users/$1.key" > "$WORK/home-$1/config.yaml"
}
as() { local who=$1; shift; "$CTL" --home "$WORK/home-$who" "$@"; }
# refused WHO EXPECTED_MESSAGE CMD...: the command fails with PermissionDenied's message.
refused() {
  local who=$1 want=$2; shift 2
  if as "$who" "$@" > "$WORK/out" 2>&1; then fail "$who: '$*' was allowed: $(cat "$WORK/out")"; fi
  assert_contains "$(cat "$WORK/out")" "$want" "$who: $*"
}
for u in alice bob carol dan mallory; do user "$u"; done

# ns_job NS NAME SCRIPT: a TrainJob file in namespace NS
ns_job() {
  local f; f=$(write_job "$2" 1 1 "$3")
  sed -i "s/^metadata:$/metadata:\n  namespace: $1\n  labels:\n    kueue.x-k8s.io\/queue-name: lq/" "$f"
  mv "$f" "$WORK/$1-$2.yaml"
  echo "$WORK/$1-$2.yaml"
}
a1=$(ns_job team-a a1 'echo a1-says-hi; sleep 300')
b1=$(ns_job team-b b1 'echo b1-says-hi; sleep 300')
b2=$(ns_job team-b b2 'true')
a_and_b=$WORK/a-and-b.yaml
{ cat "$(ns_job team-a a3 'true')"; echo '---'; cat "$b2"; } > "$a_and_b"

# Before any policy, every key is admin (today's behaviour).
as mallory get nodes >/dev/null || fail "without a policy, an enrolled key was refused"

cat > "$keys/policy.yaml" <<POLICY
users:
  operator: {role: admin}
  alice: {role: admin}
  bob: {role: user, namespaces: [team-a]}
  carol: {role: user, namespaces: [team-b]}
  dan: {role: user, namespaces: [default]}
POLICY

# Two ClusterQueues in one cohort, a LocalQueue in each namespace: only an admin applies them,
# and every job below waits in (and is admitted by) its team's queue.
queues="$WORK/queues.yaml"
for t in a b; do
  printf 'apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata:\n  name: cq-%s\nspec:\n  cohort: research\n  namespaceSelector: {}\n  resourceGroups:\n  - coveredResources: ["cpu"]\n    flavors:\n    - name: default-flavor\n      resources:\n      - name: cpu\n        nominalQuota: "1"\n---\n' "$t"
  printf 'apiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\nmetadata:\n  namespace: team-%s\n  name: lq\nspec:\n  clusterQueue: cq-%s\n---\n' "$t" "$t"
done > "$queues"
printf 'apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata:\n  name: default-flavor\n' >> "$queues"
refused bob 'user "bob" may not apply clusterqueues' apply -f "$queues"
as alice apply -f "$queues" >/dev/null || fail "an admin could not apply the queues"

# An admin applies in both namespaces; the events name her.
as alice apply -f "$b1" >/dev/null || fail "alice could not apply in team-b"
as bob apply -f "$a1" >/dev/null || fail "bob could not apply in his own namespace"
as alice wait trainjob/b1 -n team-b --for=condition=Running --timeout=60s >/dev/null ||
  fail "b1 did not run: $(as alice describe trainjob b1 -n team-b)"
as alice wait trainjob/a1 -n team-a --for=condition=Running --timeout=60s >/dev/null ||
  fail "a1 did not run: $(as alice describe trainjob a1 -n team-a)"
assert_contains "$(as alice describe trainjob b1 -n team-b)" "applied from $b1 by alice" "b1's events"
assert_contains "$(as bob describe trainjob a1 -n team-a)" "applied from $a1 by bob" "a1's events"
assert_contains "$(as bob describe trainjob a1 -n team-a)" "Admitted by ClusterQueue cq-a" "a1's queue"
assert_contains "$(as carol describe trainjob b1 -n team-b)" "Admitted by ClusterQueue cq-b" "b1's queue"
log "applied in two namespaces; events name the users"

# bob (team-a) in team-b: every change and the logs are refused, the status is not.
refused bob 'user "bob" may not apply trainjobs in namespace "team-b"' apply -f "$b2"
refused bob 'user "bob" may not apply trainjobs in namespace "team-b"' apply -f "$a_and_b"
as alice get trainjob a3 -n team-a >/dev/null 2>&1 && fail "a refused file was half-stored (a3)"
refused bob 'user "bob" may not delete trainjobs in namespace "team-b"' delete trainjob b1 -n team-b
refused bob 'user "bob" may not suspend trainjobs in namespace "team-b"' suspend trainjob b1 -n team-b
refused bob 'user "bob" may not resume trainjobs in namespace "team-b"' resume trainjob b1 -n team-b
refused bob 'user "bob" may not read logs of trainjobs in namespace "team-b"' logs b1 -n team-b
as bob get trainjob b1 -n team-b >/dev/null || fail "bob could not read team-b's status"
as bob describe trainjob b1 -n team-b >/dev/null || fail "bob could not describe team-b's job"
# carol (team-b) the other way round.
refused carol 'user "carol" may not delete trainjobs in namespace "team-a"' delete trainjob a1 -n team-a
refused carol 'user "carol" may not read logs of trainjobs in namespace "team-a"' logs a1 -n team-a
# dan (default): a job's key is "<namespace>.<name>" outside default, so "team-b.b1" in default
# would be team-b's b1; it is refused as a name, whatever the verb.
for verb in "delete trainjob" "suspend trainjob" "resume trainjob" logs; do
  # shellcheck disable=SC2086
  refused dan 'trainjob name "team-b.b1": must be a lowercase RFC 1035 label' $verb team-b.b1
done
assert_contains "$(as alice describe trainjob b1 -n team-b)" "Running" "b1 after dan's tries"
# Users manage no nodes or runtimes.
refused bob 'user "bob" may not cordon nodes' cordon node-1
refused carol 'user "carol" may not drain nodes' drain node-1 --force
printf 'apiVersion: trainer.kubeflow.org/v1alpha1\nkind: ClusterTrainingRuntime\nmetadata:\n  name: mine\nspec:\n  mlPolicy:\n    numNodes: 1\n  template:\n    spec:\n      replicatedJobs:\n        - name: node\n          template:\n            spec:\n              template:\n                spec:\n                  containers:\n                    - name: node\n                      command: ["/bin/true"]\n' > "$WORK/rt.yaml"
refused bob 'user "bob" may not apply clustertrainingruntimes (admins only)' apply -f "$WORK/rt.yaml"
as alice apply -f "$WORK/rt.yaml" >/dev/null || fail "an admin could not apply a runtime"
log "bob and carol refused outside their namespaces, status readable"

# A key the policy does not name is refused everything.
refused mallory 'user "mallory" may not get trainjobs' get trainjobs
refused mallory 'user "mallory" may not apply trainjobs (the access policy does not name the user)' apply -f "$a1"
log "unknown user refused"

# -A lists every namespace with a NAMESPACE column; -n one; json always has the namespace.
all=$(as bob get trainjobs -A)
assert_contains "$all" "NAMESPACE" "get -A"
assert_contains "$all" "team-a" "get -A"
assert_contains "$all" "team-b" "get -A"
[ "$(as bob get trainjobs -n team-b -o name)" = "trainjob/b1" ] || fail "get -n team-b: $(as bob get trainjobs -n team-b -o name)"
assert_contains "$(as bob get trainjob a1 -n team-a -o json)" '"namespace": "team-a"' "-o json"

# In their own namespace users act, and the events say who.
for who_job in bob:team-a:a1 carol:team-b:b1; do
  IFS=: read -r who ns name <<<"$who_job"
  for _ in $(seq 50); do
    as "$who" logs "$name" -n "$ns" 2>/dev/null | grep -q "$name-says-hi" && break
    sleep 0.2
  done
  as "$who" logs "$name" -n "$ns" | grep -q "$name-says-hi" || fail "$who could not read $name's log"
done
as bob suspend trainjob a1 -n team-a >/dev/null || fail "bob could not suspend a1"
assert_contains "$(as bob describe trainjob a1 -n team-a)" "suspended by bob" "a1's suspend event"

# An admin acts everywhere.
as alice suspend trainjob b1 -n team-b >/dev/null || fail "alice could not suspend b1"
assert_contains "$(as carol describe trainjob b1 -n team-b)" "suspended by alice" "b1's suspend event"
as alice resume trainjob b1 -n team-b >/dev/null || fail "alice could not resume b1"
assert_contains "$(as carol describe trainjob b1 -n team-b)" "resumed by alice" "b1's resume event"
# apply --wait follows a job of another namespace to its end.
quick=$(ns_job team-a quick 'true')
out=$(as bob apply -f "$quick" --wait --timeout 60s) || fail "apply --wait in team-a: $out"
assert_contains "$out" "trainjob/team-a/quick complete" "apply --wait"
log "users act in their namespaces, admins everywhere"

# The policy reloads without a restart: bob is granted team-b and deletes b1; a broken file
# keeps the last good policy.
printf 'users:\n  bob: {role: superuser}\n' > "$keys/policy.yaml.new"
mv "$keys/policy.yaml.new" "$keys/policy.yaml"
sleep 0.2
refused bob 'user "bob" may not delete trainjobs in namespace "team-b"' delete trainjob b1 -n team-b
grep -q "keeping the previous access policy: .*policy.yaml: line 2" "$TRAINLET_HOME/logs/coordinator.log" \
  || fail "a bad policy was not logged with its line"
cat > "$keys/policy.yaml.new" <<POLICY
users:
  operator: {role: admin}
  alice: {role: admin}
  bob: {role: user, namespaces: [team-a, team-b]}
  carol: {role: user, namespaces: [team-b]}
POLICY
mv "$keys/policy.yaml.new" "$keys/policy.yaml"
as bob delete trainjob b1 -n team-b --timeout 30s >/dev/null || fail "the reloaded policy did not grant bob team-b"
grep -q "trainjob/team-b.b1: delete requested by bob" "$TRAINLET_HOME/logs/coordinator.log" \
  || fail "the coordinator log does not say who deleted b1"
as alice delete trainjob a1 -n team-a --timeout 30s >/dev/null || fail "alice could not delete a1"
log "policy reloaded without restart; deletions logged with the user"
log "PASS"
