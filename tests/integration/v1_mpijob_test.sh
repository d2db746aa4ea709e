#!/usr/bin/env bash
# An mpi-operator MPIJob (kubeflow.org/v2beta1): a Launcher and 2 Workers with slotsPerWorker 2,
# on 2 simulated hosts (network namespaces, or 127.0.0.x aliases), running the allreduce example
# (examples/mpi-allreduce, OpenMPI's build) and the same with mpi4py (Debian's /usr/bin/python3).
# The launcher finds its hostfile where its OMPI_MCA_orte_default_hostfile points (trainlet's
# stand-in for mpi-operator's /etc/mpi/hostfile): one line per Worker's host with slots=2, and
# mpirun's result is in the launcher's log. The Workers' own command (sshd, as mpi-operator's
# examples write it) is not run: they run what mpirun starts through trainlet-exec.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/netns_lib.sh"
command -v mpirun >/dev/null || fail "mpirun not installed (apt-get install openmpi-bin)"
[ -x "$TRAINLET_BIN/mpi-allreduce" ] || fail "mpi-allreduce was not built (libopenmpi-dev missing?)"
/usr/bin/python3 -c 'import mpi4py' 2>/dev/null || fail "python3-mpi4py is not installed"

start_netns_cluster 2
log "cluster up in $NETNS_MODE mode"

# mpijob NAME PROGRAM...: the MPIJob, its launcher printing its hostfile before mpirun -n 4
# (with launcherCreationPolicy $LAUNCHER_POLICY when set).
mpijob() {
  local name=$1; shift
  {
    printf 'apiVersion: kubeflow.org/v2beta1\nkind: MPIJob\nmetadata:\n  name: %s\n' "$name"
    printf 'spec:\n  slotsPerWorker: 2\n  runPolicy:\n    cleanPodPolicy: Running\n'
    [ -n "${LAUNCHER_POLICY:-}" ] && printf '  launcherCreationPolicy: %s\n' "$LAUNCHER_POLICY"
    printf '  mpiReplicaSpecs:\n    Launcher:\n      replicas: 1\n      template:\n        spec:\n'
    printf '          containers:\n          - image: mpioperator/mpi-pi:openmpi\n            name: mpi-launcher\n'
    # OpenMPI over loopback aliases needs its TCP BTL told (as in mpi_test.sh).
    [ "$NETNS_MODE" = loopback ] && printf '            env:\n            - {name: OMPI_MCA_btl, value: "self,tcp"}\n'
    printf '            command: [/bin/sh, -c]\n            args:\n            - |\n'
    printf '              echo "hostfile at $OMPI_MCA_orte_default_hostfile:"; cat "$OMPI_MCA_orte_default_hostfile"\n'
    printf '              exec mpirun --allow-run-as-root -n 4 %s\n' "$*"
    printf '    Worker:\n      replicas: 2\n      template:\n        spec:\n          containers:\n'
    printf '          - image: mpioperator/mpi-pi:openmpi\n            name: mpi-worker\n'
    printf '            command: [/usr/sbin/sshd]\n            args: [-De, -f, /home/mpiuser/.sshd_config]\n'
  } > "$WORK/$name.yaml"
  echo "$WORK/$name.yaml"
}

# check_mpijob NAME: 4 ranks right in the launcher's log, and the hostfile it used.
check_mpijob() {
  local name=$1 out hostfile want
  "$CTL" wait "trainjob/$name" --for=condition=Complete --timeout=60s \
    || fail "$name did not complete: $("$CTL" describe trainjob "$name") $("$CTL" logs "$name")"
  out=$("$CTL" logs "$name")
  # The launcher (rank 0 of the job) is mpirun: every MPI rank's line is in its log.
  [ "$(grep -c "^\[rank 0\] rank [0-3] of 4 on .*: allreduce sum 10 (expected 10) OK" <<<"$out")" = 4 ] \
    || fail "$name: expected 4 ranks with sum 10 in the launcher's log: $out"
  if [ "$NETNS_MODE" = netns ]; then
    for h in host1 host2; do
      [ "$(grep -c "on $h:" <<<"$out")" = 2 ] || fail "$name: expected 2 ranks on $h: $out"
    done
  fi
  # The hostfile: where the launcher's env says, in its node's work dir for this job.
  hostfile=$(sed -n 's/^\[rank 0\] hostfile at \(.*\):$/\1/p' <<<"$out")
  case "$hostfile" in "$TRAINLET_HOME"/agents/node-*/work/"$name"/hostfile) ;;
    *) fail "$name: the launcher's hostfile is at '$hostfile', not in its work dir: $out" ;; esac
  [ -f "$hostfile" ] || fail "$name: no hostfile at $hostfile"
  want=$(printf '%s slots=2\n' "${NETNS_HOSTS[@]}" | sort)
  [ "$(sort "$hostfile")" = "$want" ] || fail "$name: hostfile $(cat "$hostfile"), want $want"
  assert_contains "$out" "$(head -1 "$hostfile")" "the hostfile the launcher printed"
}

# 1. The C example.
out=$("$CTL" apply -f "$(mpijob allreduce "$TRAINLET_BIN/mpi-allreduce")" 2>&1) \
  || fail "apply of an MPIJob: $out"
assert_contains "$out" "MPIJob/allreduce: became TrainJob allreduce" "apply's notes"
check_mpijob allreduce
d=$("$CTL" describe mpijob allreduce)
assert_contains "$d" "MPIJob (kubeflow.org/v2beta1), run as TrainJob allreduce" "describe's kind"
assert_contains "$d" "plugin mpi" "describe's runtime"
log "MPIJob allreduce: 2 Workers x 2 slots, sum 10 on every rank"

# 2. mpi4py, the launcher created once the workers are ready (no wait on trainlet: the workers
# run nothing until mpirun starts them).
"$CTL" apply -f "$(LAUNCHER_POLICY=WaitForWorkersReady mpijob pyallreduce /usr/bin/python3 "$TRAINLET_SOURCE_DIR/examples/mpi-allreduce/allreduce.py")" \
  >/dev/null || fail "apply of the mpi4py MPIJob"
check_mpijob pyallreduce
assert_contains "$("$CTL" get mpijobs)" "pyallreduce" "get mpijobs"
log "MPIJob mpi4py allreduce complete"
echo "PASS v1_mpijob_test"
