#!/usr/bin/env bash
# PyTorch distributed on the torch plugin: a real gloo all_reduce and DDP steps with Debian's
# python3-torch, 3 simulated hosts (network + UTS namespaces, or 127.0.0.x aliases) x 2 ranks
# started directly (no torchrun), then the same script under `python3 -m torch.distributed.run`
# (one launcher per host, reading PET_*). MASTER_PORT is the port node rank 0's agent reserved.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/netns_lib.sh"
/usr/bin/python3 -c 'import torch.distributed' 2>/dev/null \
  || fail "Debian's python3-torch is not installed (apt-get install python3-torch)"

start_netns_cluster 3
log "cluster up in $NETNS_MODE mode"
iface=lo
[ "$NETNS_MODE" = netns ] && iface=eth0

# torch_job NAME NODES PROCS COMMAND...: the example, with its command replaced and gloo kept on
# the simulated hosts' interface (hosts here have no resolvable hostname).
torch_job() {
  local name=$1 nodes=$2 procs=$3 file="$WORK/$1.yaml"; shift 3
  sed -e "s/^  name: torch-ddp/  name: $name/" -e "s/numNodes: 3/numNodes: $nodes/" \
      -e "s/numProcPerNode: 2/numProcPerNode: $procs/" -e '/^    command:/,$d' \
      "$TRAINLET_SOURCE_DIR/examples/torch-ddp/trainjob.yaml" > "$file"
  printf '      - {name: GLOO_SOCKET_IFNAME, value: "%s"}\n' "$iface" >> "$file"
  [ -n "${EXTRA_ENV:-}" ] && printf '%s\n' "$EXTRA_ENV" >> "$file"
  printf '    command:\n' >> "$file"
  for a in "$@"; do printf '      - "%s"\n' "$a" >> "$file"; done
  echo "$file"
}
train="$TRAINLET_SOURCE_DIR/examples/torch-ddp/train.py"
# The example file as shipped names train.py under /path/to/trainlet.
grep -q "/path/to/trainlet/examples/torch-ddp/train.py" "$TRAINLET_SOURCE_DIR/examples/torch-ddp/trainjob.yaml" \
  || fail "examples/torch-ddp/trainjob.yaml no longer runs train.py"

check_ranks() {  # check_ranks JOB WORLD
  local out
  out=$("$CTL" logs "$1")
  local want="all_reduce sum $(( $2 * ($2 + 1) / 2 )) (expected $(( $2 * ($2 + 1) / 2 ))) OK"
  [ "$(grep -c "$want" <<<"$out")" = "$2" ] || fail "$1: expected $2 ranks with '$want', got: $out"
  [ "$(grep -c "ddp replicas in sync" <<<"$out")" = "$2" ] || fail "$1: DDP replicas: $out"
  if [ "$NETNS_MODE" = netns ]; then
    for h in host1 host2 host3; do grep -q "on $h:" <<<"$out" || fail "$1: no rank ran on $h: $out"; done
  fi
}

# 1. Direct launch: 3 x 2 ranks with RANK/WORLD_SIZE/MASTER_*; describe says no torchrun.
start=$(date +%s)
"$CTL" apply -f "$(torch_job ddp 3 2 /usr/bin/python3 "$train")" >/dev/null
"$CTL" wait trainjob/ddp --for=condition=Complete --timeout=90s \
  || fail "ddp did not complete: $("$CTL" describe trainjob ddp) $("$CTL" logs ddp)"
check_ranks ddp 6
d=$("$CTL" describe trainjob ddp)
assert_contains "$d" "direct" "launch mode of a plain python command"
assert_contains "$d" "no torchrun" "launch mode of a plain python command"
log "direct 3x2 gloo all_reduce + DDP complete in $(( $(date +%s) - start )) s"

# 2. torchrun (as python -m torch.distributed.run): one launcher per host, PET_* env, 3 x 1 ranks.
start=$(date +%s)
# Debian's torch 1.13 on Python 3.11 cannot parse torchrun's default --redirects/--tee ("0": the
# zero flag no longer iterates); "1" (stdout) parses and keeps the ranks' output in the log.
EXTRA_ENV='      - {name: PET_REDIRECTS, value: "1"}
      - {name: PET_TEE, value: "1"}'
"$CTL" apply -f "$(torch_job trun 3 1 /usr/bin/python3 -m torch.distributed.run "$train")" >/dev/null
"$CTL" wait trainjob/trun --for=condition=Complete --timeout=90s \
  || fail "trun did not complete: $("$CTL" describe trainjob trun) $("$CTL" logs trun)"
check_ranks trun 3
d=$("$CTL" describe trainjob trun)
assert_contains "$d" "torchrun: one python3 per node" "launch mode of torchrun"
log "torchrun 3x1 complete in $(( $(date +%s) - start )) s"

# 3. The torchrun command the example's comment gives, word for word (issue 19: it said
# --no-python, which Debian's torch 1.13 refuses), with the env it says Debian's torch needs.
example="$TRAINLET_SOURCE_DIR/examples/torch-ddp/trainjob.yaml"
line=$(sed -n 's/^#   \[\(torchrun, .*\)\]$/\1/p' "$example")
[ -n "$line" ] || fail "examples/torch-ddp/trainjob.yaml gives no torchrun command"
IFS=',' read -r -a words <<<"${line//\/path\/to\/trainlet/$TRAINLET_SOURCE_DIR}"
words=("${words[@]# }")
EXTRA_ENV=$(sed -n 's/^#     \(- {name: PET_.*}\)$/      \1/p' "$example")
start=$(date +%s)
"$CTL" apply -f "$(torch_job tex 3 1 "${words[@]}")" >/dev/null
"$CTL" wait trainjob/tex --for=condition=Complete --timeout=90s \
  || fail "the example's torchrun command did not complete: $("$CTL" logs tex)"
check_ranks tex 3
log "the example's torchrun command ($line) complete in $(( $(date +%s) - start )) s"
echo "PASS torch_test ($NETNS_MODE mode)"
