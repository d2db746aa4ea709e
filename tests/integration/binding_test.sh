#!/usr/bin/env bash
# Binding inside a node: two agents impersonating the 8-GPU DGX fixture run a 2-node x 8-rank
# job; every rank reports the GPU and CPU set it was given, and the test checks that each rank of
# a node has its own GPU and a cpuset on that GPU's NUMA node. Then `describe node` for the DGX,
# AMD, CPU-only and laptop fixtures.
source "$(dirname "$0")/lib.sh"

# in_cpulist LIST SUPERSET: every CPU of LIST is in SUPERSET (Linux cpulists such as 0-13,112-125).
expand_cpulist() {
  tr ',' '\n' <<<"$1" | awk -F- 'NF==1{print $1} NF==2{for(i=$1;i<=$2;i++)print i}'
}
in_cpulist() {
  local extra
  extra=$(comm -23 <(expand_cpulist "$1" | sort) <(expand_cpulist "$2" | sort))
  [ -z "$extra" ]
}
NUMA0=0-55,112-167
NUMA1=56-111,168-223

start_cluster 2 --topology "$FIXTURES/dgx-2socket-8gpu.xml"
job=$(write_job bound 2 8 'echo "node=$TRAINLET_NODE local=$TRAINLET_LOCAL_RANK cuda=${CUDA_VISIBLE_DEVICES-unset} order=${CUDA_DEVICE_ORDER-unset} cpuset=${TRAINLET_CPUSET-unset}"')
"$CTL" apply -f "$job" >/dev/null
"$CTL" wait trainjob/bound --for=condition=Complete --timeout=60s || fail "bound did not complete"
out=$("$CTL" logs bound)
echo "$out"
[ "$(grep -c 'cuda=' <<<"$out")" = 16 ] || fail "16 ranks should report"
for node in node-1 node-2; do
  lines=$(grep "node=$node " <<<"$out")
  [ "$(wc -l <<<"$lines")" = 8 ] || fail "$node should run 8 ranks"
  gpus=$(sed -n 's/.*cuda=\([^ ]*\).*/\1/p' <<<"$lines" | sort -n)
  [ "$(tr '\n' ' ' <<<"$gpus")" = "0 1 2 3 4 5 6 7 " ] || fail "$node: each rank one distinct GPU, got: $gpus"
  while read -r line; do
    gpu=$(sed -n 's/.*cuda=\([^ ]*\).*/\1/p' <<<"$line")
    cpus=$(sed -n 's/.*cpuset=\([^ ]*\).*/\1/p' <<<"$line")
    assert_contains "$line" "order=PCI_BUS_ID" "CUDA device order"
    [ "$cpus" != unset ] && [ -n "$cpus" ] || fail "no TRAINLET_CPUSET: $line"
    if [ "$gpu" -lt 4 ]; then numa=$NUMA0; else numa=$NUMA1; fi
    in_cpulist "$cpus" "$numa" || fail "cpuset $cpus of GPU $gpu is not on its NUMA node ($numa): $line"
  done <<<"$lines"
  # No two ranks of a node share a CPU.
  all=$(sed -n 's/.*cpuset=\([^ ]*\).*/\1/p' <<<"$lines" | while read -r c; do expand_cpulist "$c"; done)
  [ "$(sort <<<"$all" | uniq -d | wc -l)" = 0 ] || fail "$node: ranks share CPUs"
done
grep -q "local=0 .*cuda=0 .*cpuset=0-13,112-125" <<<"$out" || fail "local rank 0: GPU 0, cores 0-13 with siblings"
log "16 ranks: one distinct GPU each, cpusets on the GPU's NUMA node"

# The binding is in describe, and the agents said they did not apply CPUs this machine lacks.
desc=$("$CTL" describe trainjob bound)
assert_contains "$desc" "nvidia:7" "describe shows the devices of a rank"
assert_contains "$desc" "0-13,112-125" "describe shows the cpuset of a rank"
if [ "$(nproc --all)" -lt 224 ]; then
  grep -q "reported, not applied" "$TRAINLET_HOME"/logs/*.log \
    || fail "agents should log that the impersonated binding was not applied"
fi

# The annotation turns binding off.
job=$(write_job unbound 1 2 'echo "cuda=${CUDA_VISIBLE_DEVICES-unset} cpuset=${TRAINLET_CPUSET-unset}"')
sed -i 's/^  name: unbound$/  name: unbound\n  annotations:\n    trainlet.io\/binding: "none"/' "$job"
"$CTL" apply -f "$job" >/dev/null
"$CTL" wait trainjob/unbound --for=condition=Complete --timeout=60s || fail "unbound did not complete"
out=$("$CTL" logs unbound)
[ "$(grep -c 'cuda=unset cpuset=unset' <<<"$out")" = 2 ] || fail "binding: none still bound: $out"
log "annotation trainlet.io/binding: none binds nothing"

desc=$("$CTL" describe node node-1)
echo "$desc"
assert_contains "$desc" "NUMA 0: " "NUMA 0 in the tree"
assert_contains "$desc" "CPUs 0-55,112-167" "NUMA 0 cpuset"
assert_contains "$desc" "CPUs 56-111,168-223" "NUMA 1 cpuset"
assert_contains "$desc" "GPU 0000:18:00.0 nvidia" "first GPU"
assert_contains "$desc" "[nvidia:7, health unknown]" "GPU index and health without NVML"
assert_contains "$desc" "nvidia.com/gpu=8" "allocatable GPUs"
assert_contains "$desc" "nvidia.com/gpu.present=true" "discovered label"
# GPU 0 is listed under NUMA 0, GPU 4 (0000:98:00.0) under NUMA 1.
awk '/NUMA 0:/{n=0} /NUMA 1:/{n=1} /GPU 0000:18:00.0/{a=n} /GPU 0000:98:00.0/{b=n} END{exit !(a==0 && b==1)}' <<<"$desc" \
  || fail "GPUs under the wrong NUMA node"
grep -Eq "^node-1 +Ready +224 +[0-9.]+Gi +8 " <<<"$("$CTL" get nodes)" || fail "get nodes GPUS: $("$CTL" get nodes)"
"$CTL" local down --dir "$TRAINLET_HOME" --timeout 10 >/dev/null

# The other fixtures, one agent each.
export TRAINLET_HOME="$WORK/cluster2"
start_cluster 3 --topology "$FIXTURES/amd-2socket-8gpu.xml" --topology "$FIXTURES/cpu-2socket.xml" \
  --topology "$FIXTURES/laptop-1socket.xml"
table=$("$CTL" get nodes)
echo "$table"
grep -Eq "^node-1 +Ready +384 +[0-9.]+Gi +8 " <<<"$table" || fail "AMD node: 384 CPUs, 8 GPUs"
grep -Eq "^node-2 +Ready +128 +[0-9.]+Gi +0 " <<<"$table" || fail "CPU-only node: 128 CPUs, no GPU"
grep -Eq "^node-3 +Ready +8 +16Gi +0 " <<<"$table" || fail "laptop: its iGPU is no accelerator"
desc=$("$CTL" describe node node-1)
echo "$desc"
assert_contains "$desc" "GPU 0000:e5:00.0 amd" "last MI300X"
assert_contains "$desc" "[amd:7, health unknown]" "AMD GPU index"
assert_contains "$desc" "CPUs 96-191,288-383" "AMD NUMA 1"
assert_contains "$desc" "amd.com/gpu=8" "AMD allocatable"
desc=$("$CTL" describe node node-2)
echo "$desc"
assert_contains "$desc" "NUMA 1: " "CPU-only NUMA 1"
assert_contains "$desc" "CPUs 32-63,96-127" "CPU-only NUMA 1 cpuset"
assert_contains "$desc" "NIC 0000:99:00.0 intel" "CPU-only NIC under NUMA 1"
assert_contains "$desc" "cpu=128" "CPU-only allocatable"
assert_contains "$desc" "Accelerators:
  <none>" "no accelerators"
desc=$("$CTL" describe node node-3)
echo "$desc"
assert_contains "$desc" "NUMA 0: 16Gi, CPUs 0-7" "laptop NUMA 0"
assert_contains "$desc" "memory=16Gi (17179869184)" "laptop memory"
echo "PASS binding_test"
