#!/usr/bin/env bash
# Agents impersonate other machines: hwloc XML fixtures (local up --topology) and captured macOS
# output (trainlet-agent --apple-fixture). describe node shows the conditions and the hardware as
# a tree: packages, their NUMA nodes, and the GPUs and NICs local to each.
source "$(dirname "$0")/lib.sh"

# The health check fails on a node while $WORK/unhealthy-<node> exists.
HEALTH="$WORK/health.sh"
cat > "$HEALTH" <<EOF2
#!/bin/sh
if [ -e "$WORK/unhealthy-\$TRAINLET_NODE" ]; then echo "fan 3 stalled"; exit 1; fi
exit 0
EOF2
chmod +x "$HEALTH"
touch "$WORK/unhealthy-node-2"

start_cluster 2 --topology "$FIXTURES/dgx-2socket-8gpu.xml" --topology "$FIXTURES/laptop-1socket.xml" \
  --health-check "$HEALTH" --health-interval-ms 200
table=$("$CTL" get nodes)
echo "$table"
grep -Eq "^node-1 +Ready +224 +[0-9.]+Gi +8 " <<<"$table" || fail "node-1 should show 224 CPUs and 8 GPUs"
grep -Eq "^node-2 +[A-Za-z]+ +8 +16Gi +0 " <<<"$table" || fail "node-2 should show 8 CPUs, 16Gi and 0 GPUs (an iGPU is no accelerator)"
json=$("$CTL" get nodes node-1 -o json)
assert_contains "$json" "\"vendor\": \"nvidia\"" "GPU vendor in json"
assert_contains "$json" "\"numaNode\": 1" "GPU NUMA node in json"
assert_contains "$json" "\"cpuPackages\"" "packages in json"
# Slots default to one per PU of the impersonated machine.
"$CTL" get nodes -o wide | grep -Eq "^node-1 .* 224 +0 +127\.0\.0\.2 +xml:" || fail "slots/topology source: $("$CTL" get nodes -o wide)"

log "describe node: the DGX as packages -> NUMA nodes -> GPUs/NICs"
d=$("$CTL" describe node node-1)
echo "$d"
grep -Eq "^  ├─ Package 0: .*56 cores, 112 PUs \(CPUs 0-55,112-167\)" <<<"$d" || fail "package 0 line"
grep -Eq "^  └─ Package 1: .*56 cores, 112 PUs \(CPUs 56-111,168-223\)" <<<"$d" || fail "package 1 line"
grep -Eq "^  │  └─ NUMA 0: [0-9]+Gi, CPUs 0-55,112-167$" <<<"$d" || fail "NUMA 0 under package 0"
grep -Eq "^     └─ NUMA 1: [0-9]+Gi, CPUs 56-111,168-223$" <<<"$d" || fail "NUMA 1 under package 1"
[ "$(grep -cE '^  │     [├└]─ GPU 0000:[0-9a-f]{2}:00\.0 nvidia' <<<"$d")" = 4 ] || fail "4 GPUs under NUMA 0"
[ "$(grep -cE '^        [├└]─ GPU 0000:[0-9a-f]{2}:00\.0 nvidia' <<<"$d")" = 4 ] || fail "4 GPUs under NUMA 1"
grep -Eq "^  Ready +True " <<<"$d" || fail "Ready condition"
grep -Eq "^  Healthy +True " <<<"$d" || fail "Healthy condition of node-1"
if grep -q "SchedulingDisabled" <<<"$d"; then fail "node-1 is not cordoned yet"; fi
# -o json and -o yaml carry the same data.
dj=$("$CTL" describe node node-1 -o json)
[ "$(grep -c '"package": 1' <<<"$dj")" -ge 5 ] || fail "json: NUMA 1 and its GPUs/NICs in package 1: $dj"
assert_contains "$("$CTL" describe node node-1 -o yaml)" "cpuPackages:" "describe -o yaml"

log "conditions: a failing health check and a cordon"
unhealthy() { "$CTL" describe node node-2 | grep -Eq "^  Healthy +False +.*HealthCheckFailed +.*fan 3 stalled"; }
wait_for 15 unhealthy || fail "node-2 Healthy=False with the reason: $("$CTL" describe node node-2)"
"$CTL" cordon node-1 --reason "rack 7 power work" >/dev/null
d=$("$CTL" describe node node-1)
grep -Eq "^  SchedulingDisabled +True +.*Cordoned +rack 7 power work$" <<<"$d" || fail "cordon condition: $d"
"$CTL" uncordon node-1 >/dev/null
if "$CTL" describe node node-1 | grep -q SchedulingDisabled; then fail "uncordon kept the condition"; fi

log "agents started as the captured M2 Ultra and M4 Pro"
keys="$TRAINLET_HOME/keys"
agent_ep=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["agent_endpoint"])' \
  "$TRAINLET_HOME/coordinator/endpoints.json")
i=10
for mac in m2-ultra m4-pro; do
  "$CTL" keys create --dir "$keys" --name "mac-$mac" --role agent --allowlist "$keys/agents.allow" >/dev/null
  setsid "$TRAINLET_BIN/trainlet-agent" --name "mac-$mac" --address "127.0.0.$i" \
    --coordinator "$agent_ep" --coordinator-key "$keys/coordinator.key.pub" \
    --key "$keys/mac-$mac.key" --state-dir "$WORK/mac-$mac" --heartbeat-ms 200 \
    --metrics-address 127.0.0.1:0 --apple-fixture "$FIXTURES/macos/$mac" \
    > "$WORK/mac-$mac.log" 2>&1 < /dev/null &
  EXTRA_PIDS+=($!)
  i=$((i + 1))
done
macs_ready() { [ "$("$CTL" get nodes | grep -cE '^mac-m[24]-[a-z]+ +Ready')" = 2 ]; }
wait_for 20 macs_ready || fail "Mac agents not Ready: $("$CTL" get nodes) $(cat "$WORK"/mac-*.log)"
table=$("$CTL" get nodes)
echo "$table"
grep -Eq "^mac-m2-ultra +Ready +24 +192Gi +1 " <<<"$table" || fail "M2 Ultra row"
grep -Eq "^mac-m4-pro +Ready +14 +48Gi +1 " <<<"$table" || fail "M4 Pro row"
json=$("$CTL" get nodes mac-m2-ultra -o json)
assert_contains "$json" "\"model\": \"Apple M2 Ultra\"" "chip in json"
assert_contains "$json" "\"gpuCores\": 76" "GPU cores in json"
assert_contains "$json" "\"memoryBytes\": \"206158430208\"" "unified memory in json"
assert_contains "$json" "\"apple.com/gpu\": \"1\"" "apple.com/gpu allocatable"
d=$("$CTL" describe node mac-m4-pro)
echo "$d"
assert_contains "$d" "Apple M4 Pro (20 GPU cores)" "describe: chip and GPU cores"
assert_contains "$d" "Apple M4 Pro: 10 performance + 4 efficiency cores, unified memory 48Gi" "describe: P/E cores, memory"
assert_contains "$d" "trainlet.io/gpu-model=Apple-M4-Pro" "describe: gpu-model label"
assert_contains "$d" "apple-fixture:$FIXTURES/macos/m4-pro" "describe: topology source"
grep -Eq "^  └─ Package 0: Apple M4 Pro, 14 cores, 14 PUs \(CPUs 0-13\), 48Gi" <<<"$d" || fail "Mac package line"
echo "PASS topology_test"
