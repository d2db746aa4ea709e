# Simulated hosts for multi-host tests: one network namespace per host (veth + a bridge the test
# creates, on a private /24 that routes nowhere else), each with its own UTS namespace and
# hostname, as a real host has (OpenMPI's shared-memory transport needs distinct hostnames).
# Where namespaces are not allowed, hosts are 127.0.0.x aliases on loopback instead.
# Everything is removed by netns_cleanup, which lib.sh's EXIT trap calls.

NETNS_MODE=""
NETNS_TAG="tl$$"
NETNS_SUBNET=""
NETNS_HOSTS=()     # host addresses, one per simulated host
NETNS_NAMES=()     # namespace names (netns mode)
NETNS_BRIDGE=""
NETNS_COORDINATOR_FLAGS=()  # extra trainlet-coordinator flags a test sets before start_netns_cluster
# NETNS_LOST_TIMEOUT_MS: the coordinator's lost timeout (default 2000), set before start_netns_cluster

netns_setup() {  # netns_setup COUNT
  local count=$1 i
  local octet=$(( ($$ % 200) + 20 ))
  NETNS_SUBNET="10.$octet.77"
  NETNS_BRIDGE="${NETNS_TAG}br"
  if [ -z "${TRAINLET_TEST_FORCE_LOOPBACK:-}" ] && ip link add "$NETNS_BRIDGE" type bridge 2>/dev/null; then
    NETNS_MODE=netns
    ip addr add "$NETNS_SUBNET.1/24" dev "$NETNS_BRIDGE"
    ip link set "$NETNS_BRIDGE" up
    for i in $(seq 1 "$count"); do
      local ns="${NETNS_TAG}n$i" addr="$NETNS_SUBNET.$((i + 1))"
      ip netns add "$ns"
      NETNS_NAMES+=("$ns")
      ip link add "${NETNS_TAG}v$i" type veth peer name eth0 netns "$ns"
      ip link set "${NETNS_TAG}v$i" master "$NETNS_BRIDGE" up
      ip -n "$ns" addr add "$addr/24" dev eth0
      ip -n "$ns" link set eth0 up
      ip -n "$ns" link set lo up
      NETNS_HOSTS+=("$addr")
    done
  else
    NETNS_MODE=loopback
    NETNS_SUBNET="127.0.0"
    for i in $(seq 1 "$count"); do NETNS_HOSTS+=("127.0.0.$((i + 1))"); done
  fi
  echo "simulated hosts: $NETNS_MODE mode (${NETNS_HOSTS[*]})"
}

# netns_link INDEX up|down: takes simulated host INDEX's link to the bridge down or up (a network
# partition of that host). Namespace mode only.
netns_link() {
  ip link set "${NETNS_TAG}v$1" "$2"
}

# netns_host_cmd INDEX HOSTNAME: fills NETNS_CMD with the command prefix that runs a program on
# simulated host INDEX (1-based), in its own UTS namespace named HOSTNAME. Every step execs the
# next, so a backgrounded "${NETNS_CMD[@]}" prog & has the program's PID in $!.
NETNS_CMD=()
netns_host_cmd() {
  local i=$1 name=$2
  NETNS_CMD=(unshare --uts sh -c "hostname $name; exec \"\$0\" \"\$@\"")
  if [ "$NETNS_MODE" = netns ]; then
    NETNS_CMD=(ip netns exec "${NETNS_NAMES[$((i - 1))]}" "${NETNS_CMD[@]}")
  fi
}

netns_cleanup() {
  local ns i
  for ns in "${NETNS_NAMES[@]:-}"; do [ -n "$ns" ] && ip netns del "$ns" 2>/dev/null || true; done
  if [ "$NETNS_MODE" = netns ]; then
    i=1
    while ip link show "${NETNS_TAG}v$i" >/dev/null 2>&1; do ip link del "${NETNS_TAG}v$i" 2>/dev/null || true; i=$((i + 1)); done
    ip link del "$NETNS_BRIDGE" 2>/dev/null || true
  fi
}

# start_netns_cluster COUNT: a coordinator in the root namespace and one agent per simulated
# host. Sets TRAINLET_HOME's config so trainletctl reaches it, and records every PID.
start_netns_cluster() {
  local count=$1 i keys="$TRAINLET_HOME/keys"
  netns_setup "$count"
  netns_make_keys "$count"
  local listen_host=127.0.0.1
  [ "$NETNS_MODE" = netns ] && listen_host="$NETNS_SUBNET.1"
  local cargs=("$TRAINLET_BIN/trainlet-coordinator" --state-dir "$TRAINLET_HOME/coordinator"
    --agent-listen "tcp://$listen_host:0" --exec-listen "tcp://$listen_host:0"
    --operator-listen tcp://127.0.0.1:0 --key "$keys/coordinator.key"
    --agent-allowlist "$keys/agents.allow" --operator-allowlist "$keys/operators.allow"
    --runtimes-dir "$TRAINLET_SOURCE_DIR/deploy/runtimes" --heartbeat-ms 200
    --lost-timeout-ms "${NETNS_LOST_TIMEOUT_MS:-2000}"
    --metrics-address "" --endpoints-file "$TRAINLET_HOME/endpoints.json"
    "${NETNS_COORDINATOR_FLAGS[@]}")
  # A new cluster's store is initialised once, explicitly (issue 19, defect 3).
  "${cargs[@]}" --init-store >> "$TRAINLET_HOME/logs/coordinator.log" 2>&1 \
    || fail "the store could not be initialised: $(tail -5 "$TRAINLET_HOME/logs/coordinator.log")"
  "${cargs[@]}" >> "$TRAINLET_HOME/logs/coordinator.log" 2>&1 &
  EXTRA_PIDS+=($!)
  wait_for 15 test -s "$TRAINLET_HOME/endpoints.json" || fail "coordinator did not start"
  local agent_ep operator_ep
  agent_ep=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["agent_endpoint"])' "$TRAINLET_HOME/endpoints.json")
  operator_ep=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["operator_endpoint"])' "$TRAINLET_HOME/endpoints.json")
  printf 'coordinator: %s\ncoordinator_key: keys/coordinator.key.pub\nkey: keys/operator.key\n' \
    "$operator_ep" > "$TRAINLET_HOME/config.yaml"
  netns_start_agents "$count" "$agent_ep"
}

# netns_make_keys COUNT: in $TRAINLET_HOME/keys, the coordinator's and the operator's key pairs,
# and node-1..COUNT's, each on its allowlist.
netns_make_keys() {
  local count=$1 i keys="$TRAINLET_HOME/keys"
  mkdir -p "$keys" "$TRAINLET_HOME/logs"
  "$CTL" keys create --role coordinator --name coordinator --dir "$keys" >/dev/null
  "$CTL" keys create --role operator --name operator --dir "$keys" --allowlist "$keys/operators.allow" >/dev/null
  : > "$keys/agents.allow"
  for i in $(seq 1 "$count"); do
    "$CTL" keys create --role agent --name "node-$i" --dir "$keys" --allowlist "$keys/agents.allow" >/dev/null
  done
}

# netns_start_agents COUNT ENDPOINTS: node-1..COUNT, one per simulated host, registering with
# ENDPOINTS (one agent endpoint, or an HA set's list); waits until trainletctl sees them Ready.
netns_start_agents() {
  local count=$1 endpoints=$2 i keys="$TRAINLET_HOME/keys"
  for i in $(seq 1 "$count"); do
    netns_host_cmd "$i" "host$i"
    "${NETNS_CMD[@]}" "$TRAINLET_BIN/trainlet-agent" --name "node-$i" \
      --address "${NETNS_HOSTS[$((i - 1))]}" --coordinator "$endpoints" \
      --coordinator-key "$keys/coordinator.key.pub" --key "$keys/node-$i.key" \
      --state-dir "$TRAINLET_HOME/agents/node-$i" --slots 4 --heartbeat-ms 200 --metrics-address "" \
      > "$TRAINLET_HOME/logs/node-$i.log" 2>&1 &
    EXTRA_PIDS+=($!)
  done
  wait_for 20 sh -c "[ \$('$CTL' get nodes 2>/dev/null | grep -c ' Ready ') = $count ]" \
    || fail "agents did not become Ready: $("$CTL" get nodes 2>&1)"
}

# write_mpi_survivor_job GO -> path of TrainJob "survivor": mpirun of 6 ranks (3 hosts x 2) of
# workers/wait_allreduce.py, which wait for the file GO before they allreduce; no restart. OpenMPI's
# TCP is narrowed to the simulated hosts' subnet (shared memory off on loopback hosts).
write_mpi_survivor_job() {
  local go=$1 job="$WORK/survivor.yaml"
  {
    printf 'apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata:\n  name: survivor\n'
    printf '  annotations:\n    trainlet.io/max-restarts: "0"\n'
    printf 'spec:\n  runtimeRef:\n    name: mpi-distributed\n  trainer:\n    numNodes: 3\n    numProcPerNode: 2\n'
    printf '    env:\n'
    printf '      - {name: OMPI_MCA_btl_tcp_if_include, value: "%s.0/24"}\n' "$NETNS_SUBNET"
    printf '      - {name: OMPI_MCA_oob_tcp_if_include, value: "%s.0/24"}\n' "$NETNS_SUBNET"
    [ "$NETNS_MODE" = loopback ] && printf '      - {name: OMPI_MCA_btl, value: "self,tcp"}\n'
    printf '    command:\n      - mpirun\n      - --allow-run-as-root\n      - -np\n      - "6"\n'
    printf '      - /usr/bin/python3\n      - "%s"\n      - "%s"\n' \
      "$TRAINLET_SOURCE_DIR/tests/integration/workers/wait_allreduce.py" "$go"
  } > "$job"
  echo "$job"
}
