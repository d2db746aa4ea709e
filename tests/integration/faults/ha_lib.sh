# Helpers for the high-availability tests (issue 17): a 3-member etcd cluster and coordinators
# on `store: etcd`, next to the keys, runtimes and agents of a `local up` cluster. Source after
# lib.sh. Everything started here is in EXTRA_PIDS, so lib.sh's EXIT trap stops it by PID.
ETCD=${TRAINLET_ETCD:-/usr/bin/etcd}
ETCDCTL=${TRAINLET_ETCDCTL:-/usr/bin/etcdctl}
if [ ! -x "$ETCD" ] || [ ! -x "$ETCDCTL" ]; then
  echo "SKIP: etcd is not installed (Debian's etcd-server and etcd-client)"
  exit 77
fi
HA_PREFIX=/trainlet/it/
HA_TTL=3
HA_COORDINATOR_FLAGS=()  # extra trainlet-coordinator flags a test sets before start_coordinator

# free_port: a loopback port the kernel says is free now.
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# start_etcd: three members on loopback ports, data in $WORK/etcd; sets ETCD_ENDPOINTS,
# ETCD_PIDS and ETCD_ARGS_<i> (to restart a member).
start_etcd() {
  local i cluster="" peers=() clients=()
  ETCD_PIDS=()
  for i in 0 1 2; do
    peers[$i]=$(free_port)
    clients[$i]=$(free_port)
    cluster+="${cluster:+,}m$i=http://127.0.0.1:${peers[$i]}"
  done
  ETCD_ENDPOINTS=""
  for i in 0 1 2; do
    ETCD_ENDPOINTS+="${ETCD_ENDPOINTS:+,}http://127.0.0.1:${clients[$i]}"
    mkdir -p "$WORK/etcd/m$i"
    local args=("$ETCD" --name "m$i" --data-dir "$WORK/etcd/m$i"
      --listen-client-urls "http://127.0.0.1:${clients[$i]}"
      --advertise-client-urls "http://127.0.0.1:${clients[$i]}"
      --listen-peer-urls "http://127.0.0.1:${peers[$i]}"
      --initial-advertise-peer-urls "http://127.0.0.1:${peers[$i]}"
      --initial-cluster "$cluster" --initial-cluster-state new
      --initial-cluster-token "it-$$" --heartbeat-interval 50 --election-timeout 500
      --log-level warn)
    printf '%q ' "${args[@]}" > "$WORK/etcd/m$i.cmd"
    "${args[@]}" > "$WORK/etcd/m$i.log" 2>&1 &
    ETCD_PIDS[$i]=$!
    EXTRA_PIDS+=("${ETCD_PIDS[$i]}")
  done
  wait_for 20 "$ETCDCTL" --endpoints "$ETCD_ENDPOINTS" endpoint health --cluster \
    || fail "etcd did not become healthy: $(tail -5 "$WORK"/etcd/m0.log)"
}

# etcd_get ARGS...: etcdctl against the cluster.
etcdctl_() { "$ETCDCTL" --endpoints "$ETCD_ENDPOINTS" "$@"; }

# capture_local_cluster: after start_cluster, saves the coordinator's and agents' command lines
# (COORD_ARGS, AGENT_CMDS) and stops that cluster: the test starts its own, on etcd.
capture_local_cluster() {
  local cpid pidf
  cpid=$(awk '{print $1}' "$TRAINLET_HOME/pids/coordinator.pid")
  mapfile -d '' COORD_ARGS < "/proc/$cpid/cmdline"
  AGENT_CMDS=()
  for pidf in "$TRAINLET_HOME"/pids/node-*.pid; do
    local apid args
    apid=$(awk '{print $1}' "$pidf")
    mapfile -d '' args < "/proc/$apid/cmdline"
    AGENT_CMDS+=("$(printf '%q ' "${args[@]}")")
  done
  "$CTL" local down --dir "$TRAINLET_HOME" --timeout 10 >/dev/null
}

# start_coordinator N: coordinator N (1, 2, ...) on store: etcd with fixed ports; sets
# COORD_PID_N, AGENT_EP_N, OP_EP_N.
start_coordinator() {
  local n=$1 a o x i args=("${COORD_ARGS[@]}")
  a=$(eval echo "\${AGENT_PORT_$n:-}"); o=$(eval echo "\${OP_PORT_$n:-}")
  if [ -z "$a" ]; then
    a=$(free_port); o=$(free_port)
    eval "AGENT_PORT_$n=$a OP_PORT_$n=$o"
  fi
  x=$(free_port)
  for i in "${!args[@]}"; do
    case "${args[$i]}" in
      --agent-listen) args[$((i + 1))]=tcp://127.0.0.1:$a ;;
      --operator-listen) args[$((i + 1))]=tcp://127.0.0.1:$o ;;
      --exec-listen) args[$((i + 1))]=tcp://127.0.0.1:$x ;;
      --state-dir) args[$((i + 1))]=$WORK/coord$n ;;
      --endpoints-file) args[$((i + 1))]=$WORK/coord$n.json ;;
    esac
  done
  mkdir -p "$WORK/coord$n"
  # The etcd prefix is a new cluster's store: initialised explicitly, once (issue 19, defect 3;
  # a store already initialised keeps its cluster id).
  "${args[@]}" --store etcd --etcd-endpoints "$ETCD_ENDPOINTS" --etcd-prefix "$HA_PREFIX" \
    --etcd-request-timeout-ms 3000 --init-store >> "$WORK/coord$n.log" 2>&1 \
    || fail "coordinator $n could not initialise the store: $(tail -5 "$WORK/coord$n.log")"
  setsid "${args[@]}" --store etcd --etcd-endpoints "$ETCD_ENDPOINTS" --etcd-prefix "$HA_PREFIX" \
    --etcd-lease-ttl-s "$HA_TTL" --etcd-request-timeout-ms 3000 "${HA_COORDINATOR_FLAGS[@]}" \
    >> "$WORK/coord$n.log" 2>&1 < /dev/null &
  eval "COORD_PID_$n=$!"
  EXTRA_PIDS+=("$!")
  eval "AGENT_EP_$n=tcp://127.0.0.1:$a OP_EP_$n=tcp://127.0.0.1:$o"
}

# start_agents ENDPOINTS: the captured agents, with --coordinator ENDPOINTS.
start_agents() {
  local cmd args i
  AGENT_PIDS=()
  for cmd in "${AGENT_CMDS[@]}"; do
    eval "args=($cmd)"
    for i in "${!args[@]}"; do
      [ "${args[$i]}" = --coordinator ] && args[$((i + 1))]=$1
      # The agents joined the local cluster's coordinator first: re-pointed to the etcd one, a
      # cluster of another identity, as docs/operations.md says (issue 19, defect 3).
      [ "${args[$i]}" = --state-dir ] && rm -f "${args[$((i + 1))]}/cluster-id"
    done
    local name=${args[0]}
    for i in "${!args[@]}"; do [ "${args[$i]}" = --name ] && name=${args[$((i + 1))]}; done
    setsid "${args[@]}" >> "$WORK/$name.log" 2>&1 < /dev/null &
    AGENT_PIDS+=("$!")
    EXTRA_PIDS+=("$!")
  done
}

# use_coordinators ENDPOINTS: trainletctl's config names these operator endpoints.
use_coordinators() {
  sed -i "s|^coordinator:.*|coordinator: \"$1\"|" "$TRAINLET_HOME/config.yaml"
}

# etcd_follower: the index of a member that is not etcd's raft leader (losing the raft leader
# costs an election, during which a write in flight may time out).
etcd_follower() {
  local i url
  for i in 0 1 2; do
    url=$(cut -d, -f$((i + 1)) <<<"$ETCD_ENDPOINTS")
    if "$ETCDCTL" --endpoints "$url" endpoint status -w json 2>/dev/null | python3 -c '
import json, sys
s = json.load(sys.stdin)[0]["Status"]
sys.exit(0 if s["leader"] != s["header"]["member_id"] else 1)'; then
      echo "$i"
      return 0
    fi
  done
  return 1
}

# ha_logs: the coordinators' logs, for a failure.
ha_logs() { tail -n 20 "$WORK"/coord*.log 2>/dev/null || true; }
