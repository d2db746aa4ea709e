#!/usr/bin/env bash
# MLX's ring backend on the native mlx plugin (runtime mlx-ring): a C++ worker that follows MLX's
# contract (MLX_HOSTFILE: one "ip:port" list per rank; MLX_RANK) sums a vector around a 4-rank
# ring across 2 agents, first with one connection per rank, then with two
# (trainlet.io/mlx-ring-connections). Every rank checks its neighbours and the sum.
source "$(dirname "$0")/lib.sh"
[ -x "$TRAINLET_BIN/mlx_ring_worker" ] || fail "mlx_ring_worker was not built"

start_cluster 2 --slots 2
log "cluster up"

# ring_job NAME [CONNECTIONS]: the example, pointed at the test worker.
ring_job() {
  local name=$1 file="$WORK/$1.yaml"
  sed -e "s/^  name: mlx-ring-example/  name: $name/" \
      -e "s|/path/to/mlx_ring_worker|$TRAINLET_BIN/mlx_ring_worker|" \
      "$TRAINLET_SOURCE_DIR/examples/mlx-ring/trainjob.yaml" > "$file"
  if [ -n "${2:-}" ]; then
    sed -i "s|^metadata:|metadata:\n  annotations:\n    trainlet.io/mlx-ring-connections: \"$2\"|" "$file"
  fi
  echo "$file"
}

check_ring() {  # check_ring JOB CONNECTIONS
  local out r
  out=$("$CTL" logs "$1")
  for r in 0 1 2 3; do
    grep -q "mlx ring rank $r of 4 on .*: $2 connection(s) to rank $(( (r + 1) % 4 )), sum OK" <<<"$out" \
      || fail "$1: rank $r did not report a right sum over $2 connection(s): $out"
  done
}

for c in 1 2; do
  start=$(date +%s)
  job="ring$c"
  if [ "$c" = 1 ]; then file=$(ring_job "$job"); else file=$(ring_job "$job" "$c"); fi
  "$CTL" apply -f "$file" >/dev/null
  "$CTL" wait "trainjob/$job" --for=condition=Complete --timeout=60s \
    || fail "$job did not complete: $("$CTL" describe trainjob "$job") $("$CTL" logs "$job")"
  check_ring "$job" "$c"
  d=$("$CTL" describe trainjob "$job")
  assert_contains "$d" "MLX ring" "launch mode"
  assert_contains "$d" "$c connection(s) per rank" "launch mode"
  # The hostfile the agents wrote: 4 ranks, in rank order, 2 per node, $c addresses each.
  hf=$(find "$TRAINLET_HOME/agents" -path "*$job*" -name mlx-hostfile.json | head -1)
  [ -n "$hf" ] || fail "$job: no mlx-hostfile.json in a work dir"
  python3 - "$hf" "$c" <<'PY' || fail "$job: hostfile $(cat "$hf")"
import json, sys
hosts, c = json.load(open(sys.argv[1])), int(sys.argv[2])
assert len(hosts) == 4 and all(len(h) == c for h in hosts), hosts
ips = [h[0].rsplit(":", 1)[0] for h in hosts]
assert ips[0] == ips[1] and ips[2] == ips[3] and ips[0] != ips[2], ips
addrs = [a for h in hosts for a in h]  # each ip:port once; two nodes may reserve the same port
assert len(set(addrs)) == len(addrs) and all(int(a.rsplit(":", 1)[1]) > 0 for a in addrs), addrs
PY
  log "4-rank ring over $c connection(s) per rank complete in $(( $(date +%s) - start )) s"
done
echo "PASS mlx_ring_test"
