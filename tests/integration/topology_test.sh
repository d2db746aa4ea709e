#!/usr/bin/env bash
# Agents impersonate other machines from hwloc XML fixtures (local up --topology).
source "$(dirname "$0")/lib.sh"

start_cluster 2 --topology "$FIXTURES/dgx-2socket-8gpu.xml" --topology "$FIXTURES/laptop-1socket.xml"
table=$("$CTL" get nodes)
echo "$table"
grep -Eq "^node-1 +Ready +224 +[0-9.]+Gi +8 " <<<"$table" || fail "node-1 should show 224 CPUs and 8 GPUs"
grep -Eq "^node-2 +Ready +8 +16Gi +0 " <<<"$table" || fail "node-2 should show 8 CPUs, 16Gi and 0 GPUs (an iGPU is no accelerator)"
json=$("$CTL" get nodes node-1 -o json)
assert_contains "$json" "\"vendor\": \"nvidia\"" "GPU vendor in json"
assert_contains "$json" "\"numaNode\": 1" "GPU NUMA node in json"
# Slots default to one per PU of the impersonated machine.
"$CTL" get nodes -o wide | grep -Eq "^node-1 .* 224 +0 +127\.0\.0\.2 +xml:" || fail "slots/topology source: $("$CTL" get nodes -o wide)"
echo "PASS topology_test"
