#!/usr/bin/env bash
# Kueue's queue objects through trainletctl (issue 14): Kueue's own samples applied unchanged, the
# get tables and -o json, a file with one bad Kueue document stores nothing, delete, and the
# objects survive a coordinator kill -9 and restart.
source "$(dirname "$0")/lib.sh"
KUEUE="$FIXTURES/kueue"

start_cluster 1
out=$("$CTL" apply -f "$KUEUE/single-clusterqueue-setup.yaml")
assert_contains "$out" "resourceflavor/default-flavor created" "apply of Kueue's sample"
assert_contains "$out" "clusterqueue/cluster-queue created" "apply of Kueue's sample"
assert_contains "$out" "localqueue/user-queue created" "apply of Kueue's sample"
"$CTL" apply -f "$KUEUE/workload-priority-class.yaml" >/dev/null
"$CTL" apply -f "$KUEUE/team-a-cq-cohort.yaml" >/dev/null
out=$("$CTL" apply -f "$KUEUE/single-clusterqueue-setup.yaml")
assert_contains "$out" "clusterqueue/cluster-queue unchanged" "re-apply"

cq=$("$CTL" get clusterqueues)
assert_contains "$cq" "NAME" "get cq"
grep -qE '^team-a-cq +team-ab +BestEffortFIFO' <<<"$cq" || fail "get cq: $cq"
grep -qE '^cluster-queue +<none> +BestEffortFIFO' <<<"$cq" || fail "get cq: $cq"
grep -qE '^default +user-queue +cluster-queue' <<<"$("$CTL" get lq)" || fail "get lq"
grep -qE '^sample-priority +10000' <<<"$("$CTL" get wpc)" || fail "get wpc"
assert_contains "$("$CTL" get rf default-flavor)" "default-flavor" "get rf NAME"
assert_contains "$("$CTL" get cq cluster-queue -o json)" 'nominalQuota: 9' "get cq -o json"
if "$CTL" get lq user-queue -n team-a >/dev/null 2>&1; then fail "user-queue is not in team-a"; fi

# One bad Kueue document: refused by path, nothing of the file stored.
cat > "$WORK/bad.yaml" <<'YAML'
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: fresh}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: lender}
spec:
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: fresh
      resources:
      - {name: cpu, nominalQuota: 4, lendingLimit: 2}
YAML
if "$CTL" apply -f "$WORK/bad.yaml" 2> "$WORK/err"; then fail "a lendingLimit without a cohort was accepted"; fi
assert_contains "$(cat "$WORK/err")" \
  "ClusterQueue/lender: spec.resourceGroups[0].flavors[0].resources[0].lendingLimit: must not be set without a cohort" \
  "refusal by path"
if "$CTL" get rf fresh >/dev/null 2>&1; then fail "the bad file's ResourceFlavor was stored"; fi

out=$("$CTL" delete clusterqueue team-a-cq)
assert_contains "$out" "clusterqueue/team-a-cq deleted" "delete cq"
if "$CTL" delete cq team-a-cq 2> "$WORK/err"; then fail "a second delete succeeded"; fi
assert_contains "$(cat "$WORK/err")" "ClusterQueue/team-a-cq not found" "second delete"

# kill -9 and restart on the same endpoints: the objects are still there.
remember_coordinator
kill -9 "$COORD_PID"
restart_coordinator
wait_for 20 sh -c "'$CTL' get cq >/dev/null 2>&1" || fail "coordinator did not come back"
cq=$("$CTL" get cq)
grep -qE '^cluster-queue ' <<<"$cq" || fail "cluster-queue lost in the restart: $cq"
if grep -q team-a-cq <<<"$cq"; then fail "the deleted team-a-cq came back: $cq"; fi
grep -qE '^sample-priority +10000' <<<"$("$CTL" get wpc)" || fail "wpc lost in the restart"
log "queue objects applied, listed, refused, deleted and kept across a restart"
echo "PASS queues_test"
