#!/usr/bin/env bash
# Issue 19, defect 11: describe says when a job's CPUs must be shared, from every node, including
# an MPI job's node that runs no rank of its own plan (its ranks come from the launcher's orted).
# Two simulated hosts of this machine's CPUs (4 slots each): plain 2-node jobs take a CPU on each
# node until none is free, then a 2-node OpenMPI job must share on both; its describe names the
# jobs it shares with on each node, and they name it back.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/netns_lib.sh"
command -v mpirun >/dev/null || fail "mpirun not installed (apt-get install openmpi-bin)"
cpus=$(nproc)
if [ "$cpus" -gt 3 ]; then
  log "$cpus CPUs: 4 slots never run out of CPUs; nothing to share, nothing to test"
  exit 77
fi

start_netns_cluster 2
log "cluster up in $NETNS_MODE mode"

hold='for i in $(seq 600); do [ -e '"$WORK"'/go ] && exit 0; sleep 0.1; done; exit 1'
started() { "$CTL" describe trainjob "$1" 2>/dev/null | grep -q "Running"; }
# One 1-rank-per-node plain job per CPU: every CPU of both nodes is held.
for i in $(seq 1 "$cpus"); do
  "$CTL" apply -f "$(write_job "fill$i" 2 1 "$hold")" >/dev/null
  wait_for 30 started "fill$i" || fail "fill$i never started: $("$CTL" describe trainjob "fill$i")"
done

file="$WORK/mpi.yaml"
{
  printf 'apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata:\n  name: mpi\n'
  printf 'spec:\n  runtimeRef:\n    name: mpi-distributed\n  trainer:\n    numNodes: 2\n    numProcPerNode: 1\n'
  [ "$NETNS_MODE" = loopback ] && printf '    env:\n      - {name: OMPI_MCA_btl, value: "self,tcp"}\n'
  printf '    command: [mpirun, --allow-run-as-root, -np, "2", /bin/sh, -c, %s]\n' \
    "$(python3 -c 'import json,sys; print(json.dumps(sys.argv[1]))' "$hold")"
} > "$file"
"$CTL" apply -f "$file" >/dev/null
has_both() { [ "$("$CTL" describe trainjob mpi | grep -c 'CpusShared')" -ge 2 ]; }
wait_for 30 has_both || fail "the MPI job's CPU notes did not come from both nodes: $("$CTL" describe trainjob mpi)"
desc=$("$CTL" describe trainjob mpi)
echo "$desc" | sed -n '/CPUs shared:/,/^[A-Z]/p'
assert_contains "$desc" "CPUs shared:" "describe has the CPUs shared section"
for node in node-1 node-2; do
  grep -q "CpusShared.*of node $node shared with trainjob/fill" <<<"$desc" ||
    fail "no note for $node (the launcher's node or the other one): $desc"
done
other=$(sed -n 's/.*CpusShared.*shared with trainjob\/\(fill[0-9]*\).*/\1/p' <<<"$desc" | head -1)
assert_contains "$("$CTL" describe trainjob "$other")" "shared with trainjob/mpi" \
  "the job the MPI job shares with says so too"
"$CTL" get trainjob mpi -o json | grep -q '"CpusShared"' || fail "-o json lacks the notes"
touch "$WORK/go"
for j in $(seq 1 "$cpus" | sed 's/^/fill/') mpi; do
  "$CTL" wait "trainjob/$j" --for=condition=Complete --timeout=60s >/dev/null || fail "$j: $("$CTL" describe trainjob "$j"; "$CTL" logs "$j")"
done
log "an MPI job sharing CPUs on both of its nodes says so in describe, and so do the others"
log "PASS"
