#!/usr/bin/env bash
# CPU sets of concurrent jobs on one node (issue 19, defect 11): one simulated host whose agent
# hands out this machine's CPUs (4 slots). Concurrent 1-rank jobs get disjoint CPU sets while the
# node has free CPUs (TRAINLET_CPUSET and the affinity the rank really has); the one that must
# share says so in `describe`; an agent killed and started again keeps what its running ranks
# hold. Then two concurrent OpenMPI jobs on the node, default binding: their ranks run on
# disjoint CPUs (each rank's Cpus_allowed_list), inside the job's TRAINLET_CPUSET.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/netns_lib.sh"
command -v mpirun >/dev/null || fail "mpirun not installed (apt-get install openmpi-bin)"

start_netns_cluster 1
log "cluster up in $NETNS_MODE mode"
cpus=$(nproc)

# A rank that says what it was given, then waits for $WORK/go (at most 60 s).
report='echo "job=$TRAINLET_JOB cpuset=${TRAINLET_CPUSET-unset} allowed=$(grep Cpus_allowed_list /proc/self/status | cut -f2)"; for i in $(seq 600); do [ -e '"$WORK"'/go ] && exit 0; sleep 0.1; done; exit 1'

# expand LIST: one CPU per line
expand() { tr ',' '\n' <<<"$1" | awk -F- 'NF==1{print $1} NF==2{for(i=$1;i<=$2;i++)print i}'; }
field() { sed -n "s/.*$2=\([^ ]*\).*/\1/p" <<<"$1" | head -1; }
# started JOB: its rank has said what it was given
started() { "$CTL" logs "$1" 2>/dev/null | grep -q "allowed="; }
start_plain() {  # start_plain NAME: applies a 1-rank plain job and waits until its rank reports
  "$CTL" apply -f "$(write_job "$1" 1 1 "$report")" >/dev/null
  wait_for 30 started "$1" || fail "$1 never started: $("$CTL" describe trainjob "$1")"
}

# 1. min(CPUs, 3) concurrent plain jobs, one at a time: each gets CPUs no other one holds.
jobs=()
for i in $(seq 1 $(( cpus < 3 ? cpus : 3 ))); do jobs+=("plain$i"); start_plain "plain$i"; done
seen="$WORK/seen"; : > "$seen"
for j in "${jobs[@]}"; do
  line=$("$CTL" logs "$j" | grep allowed=)
  set_=$(field "$line" cpuset) allowed=$(field "$line" allowed)
  [ "$set_" = "$allowed" ] || fail "$j: TRAINLET_CPUSET $set_ but the rank may run on $allowed"
  expand "$set_" >> "$seen"
  "$CTL" describe trainjob "$j" | grep -q "shared with" && fail "$j should not share: $("$CTL" describe trainjob "$j")"
done
dups=$(sort "$seen" | uniq -d)
[ -z "$dups" ] || fail "concurrent jobs share CPUs $dups: $(cat "$seen")"
log "${#jobs[@]} concurrent jobs on $cpus CPUs: disjoint CPU sets"

# 2. An agent restart keeps the CPUs its running ranks hold: a job started after it gets none of
# them. kill -9, as a crash; the ranks run on under their steps.
kill -9 "${EXTRA_PIDS[1]}"
netns_host_cmd 1 host1
agent_ep=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["agent_endpoint"])' "$TRAINLET_HOME/endpoints.json")
"${NETNS_CMD[@]}" "$TRAINLET_BIN/trainlet-agent" --name node-1 --address "${NETNS_HOSTS[0]}" \
  --coordinator "$agent_ep" --coordinator-key "$TRAINLET_HOME/keys/coordinator.key.pub" \
  --key "$TRAINLET_HOME/keys/node-1.key" --state-dir "$TRAINLET_HOME/agents/node-1" --slots 4 \
  --heartbeat-ms 200 --metrics-address "" >> "$TRAINLET_HOME/logs/node-1.log" 2>&1 &
EXTRA_PIDS+=($!)
wait_for 20 sh -c "'$CTL' get nodes 2>/dev/null | grep -q ' Ready '" || fail "the agent did not come back"

# 3. One job more than the node has free CPUs (when it has fewer than 4 slots' worth): it shares,
# and describe says with whom.
if [ "$cpus" -lt 4 ]; then
  start_plain extra
  line=$("$CTL" logs extra | grep allowed=)
  [ "$(field "$line" cpuset)" = "$(field "$line" allowed)" ] || fail "extra: $line"
  desc=$("$CTL" describe trainjob extra)
  assert_contains "$desc" "shared with trainjob/plain" "the job that must share says so"
  # As an event and describe's "CPUs shared:" section (any node, ranks or not), for both sides.
  assert_contains "$desc" "CPUs shared:" "describe has the CPUs shared section"
  assert_contains "$desc" "CpusShared" "the note is one of the job's events"
  other=$(sed -n 's/.*CpusShared.*shared with trainjob\/\([a-z0-9-]*\).*/\1/p' <<<"$desc" | head -1)
  [ -n "$other" ] || fail "no CpusShared event names a job: $desc"
  assert_contains "$("$CTL" describe trainjob "$other")" "shared with trainjob/extra" \
    "the job it shares with says so too"
  "$CTL" get trainjob extra -o json | grep -q '"CpusShared"' || fail "-o json lacks the note"
  log "a job beyond the free CPUs shares them, and describe says so (after an agent restart)"
else
  log "$cpus CPUs: 4 slots never run out of CPUs; the sharing case is left out"
fi
touch "$WORK/go"
for j in "${jobs[@]}" $([ "$cpus" -lt 4 ] && echo extra); do
  "$CTL" wait "trainjob/$j" --for=condition=Complete --timeout=60s >/dev/null || fail "$j: $("$CTL" describe trainjob "$j")"
done
rm -f "$WORK/go"

# 4. Two concurrent OpenMPI jobs on the node, OpenMPI's default binding: mpirun and its ranks stay
# in the job's CPUs, so the two ranks run on disjoint CPUs (OpenMPI 4.1 alone binds both to
# core 0).
mpi_job() {  # mpi_job NAME: 1 node x 1 rank, the rank reports its CPUs and waits
  local file="$WORK/$1.yaml"
  {
    printf 'apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata:\n  name: %s\n' "$1"
    printf 'spec:\n  runtimeRef:\n    name: mpi-distributed\n  trainer:\n    numNodes: 1\n    numProcPerNode: 1\n'
    [ "$NETNS_MODE" = loopback ] && printf '    env:\n      - {name: OMPI_MCA_btl, value: "self,tcp"}\n'
    printf '    command:\n      - mpirun\n      - --allow-run-as-root\n      - -np\n      - "1"\n'
    printf '      - /bin/sh\n      - -c\n      - %s\n' "$(python3 -c 'import json,sys; print(json.dumps(sys.argv[1]))' "$report")"
  } > "$file"
  echo "$file"
}
for j in mpia mpib; do
  "$CTL" apply -f "$(mpi_job "$j")" >/dev/null
  wait_for 30 started "$j" || fail "$j never started: $("$CTL" describe trainjob "$j"; "$CTL" logs "$j")"
done
a=$("$CTL" logs mpia | grep allowed=) b=$("$CTL" logs mpib | grep allowed=)
touch "$WORK/go"
echo "$a"; echo "$b"
common=$(comm -12 <(expand "$(field "$a" allowed)" | sort) <(expand "$(field "$b" allowed)" | sort))
[ -z "$common" ] || fail "two MPI jobs' ranks share CPUs $common: $a / $b"
for l in "$a" "$b"; do
  extra=$(comm -23 <(expand "$(field "$l" allowed)" | sort) <(expand "$(field "$l" cpuset)" | sort))
  [ -z "$extra" ] || fail "an MPI rank runs outside its job's CPUs: $l"
done
for j in mpia mpib; do
  "$CTL" wait "trainjob/$j" --for=condition=Complete --timeout=60s >/dev/null || fail "$j: $("$CTL" describe trainjob "$j")"
done
log "two concurrent MPI jobs: ranks on disjoint CPUs, inside their jobs' CPU sets"
log "PASS"
