#!/usr/bin/env bash
# Soak: mpi4py's cpi computation (tests/integration/workers/mpi_cpi.c) with plain `mpirun`, no
# --mca options, across the 3 agents of one `trainletctl local up`, RUNS times (default 10); every
# run must succeed with pi right (issue 19: on a cluster whose agents shared one hostname it failed
# 5 of 5 with SIGSEGV in OpenMPI's shared memory). Not in ctest (about 10 s a run on 2 cores):
#
#   cmake --build build --target trainletctl trainlet-coordinator trainlet-agent trainlet-step \
#     trainlet-exec mpi_cpi
#   TRAINLET_BIN=$PWD/build/bin TRAINLET_SOURCE_DIR=$PWD bash tests/soak/local_mpi_cpi_soak.sh [RUNS]
#
# Run it as root (UTS namespaces per agent) and, once, as a user with unprivileged user
# namespaces (the same through a user namespace); it prints N of N.
source "$(dirname "$0")/../integration/lib.sh"
RUNS=${1:-10}
command -v mpirun >/dev/null || fail "mpirun not installed (openmpi-bin)"
[ -x "$TRAINLET_BIN/mpi_cpi" ] || fail "$TRAINLET_BIN/mpi_cpi not built (libopenmpi-dev; target mpi_cpi)"

start_cluster 3
passed=0
for i in $(seq 1 "$RUNS"); do
  printf 'apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata:\n  name: cpi-%s\n' "$i" > "$WORK/cpi.yaml"
  printf 'spec:\n  runtimeRef:\n    name: mpi-distributed\n  trainer:\n    numNodes: 3\n    numProcPerNode: 2\n' >> "$WORK/cpi.yaml"
  printf '    command: [mpirun, --allow-run-as-root, -np, "6", %s]\n' "$TRAINLET_BIN/mpi_cpi" >> "$WORK/cpi.yaml"
  "$CTL" apply -f "$WORK/cpi.yaml" >/dev/null
  if "$CTL" wait "trainjob/cpi-$i" --for=condition=Complete --timeout=120s >/dev/null 2>&1 &&
     "$CTL" logs "cpi-$i" | grep -q "pi is approximately 3.14159265"; then
    passed=$((passed + 1))
  else
    log "run $i failed:"
    "$CTL" logs "cpi-$i" 2>&1 | tail -10 || true
  fi
  "$CTL" delete trainjob "cpi-$i" >/dev/null
done
log "mpi cpi with plain mpirun on local up: $passed of $RUNS"
[ "$passed" = "$RUNS" ] || fail "$passed of $RUNS"
