#!/usr/bin/env bash
# Issue 19, "Ranks and secrets", for MPI: a real OpenMPI job (mpi-distributed, mpirun through
# trainlet-exec) whose container sets securityContext.runAsUser/runAsGroup runs every rank as that
# user, the ones the remote orted starts included: the orted is an exec session, and it runs as
# the job's user, not as the agent's (root here). Every rank has no_new_privs, so a setuid-root
# copy of `id` the test makes reports the rank's uid, not 0. describe names the user per node.
# Needs root: it exits 77 (skipped) otherwise.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/netns_lib.sh"

if [ "$(id -u)" != 0 ]; then
  echo "SKIP: run_as needs root (this test switches ranks to the user nobody)"
  exit 77
fi
NOBODY=$(id -u nobody 2>/dev/null) || { echo "SKIP: no user nobody on this machine"; exit 77; }
NOGROUP=$(id -g nobody)
command -v mpirun >/dev/null || fail "mpirun not installed (apt-get install openmpi-bin)"

start_netns_cluster 2
log "cluster up in $NETNS_MODE mode"
# The user must reach its work dir under the test's 0700 temp dir (run_as_test.sh checks the
# refusal when it cannot).
chmod o+x "$WORK" "$TRAINLET_HOME" "$TRAINLET_HOME/agents"

# A setuid-root copy of id: without no_new_privs it would print 0 to any user that runs it.
mkdir -m 0755 "$WORK/suid"
cp /usr/bin/id "$WORK/suid/id"
chown root:root "$WORK/suid/id"
chmod 4755 "$WORK/suid/id"
[ "$(setpriv --reuid="$NOBODY" --regid="$NOGROUP" --clear-groups "$WORK/suid/id" -u)" = 0 ] ||
  fail "the setuid copy of id does not lift a plain process here (nosuid mount?)"

# The runtime: mpi-distributed with its container's securityContext set.
{
  sed -e 's/name: mpi-distributed/name: mpi-as-nobody/' "$TRAINLET_SOURCE_DIR/deploy/runtimes/mpi-distributed.yaml"
  printf '                      securityContext: {runAsUser: %s, runAsGroup: %s}\n' "$NOBODY" "$NOGROUP"
} > "$WORK/runtime.yaml"
"$CTL" apply -f "$WORK/runtime.yaml" >/dev/null

# 2 hosts x 2 ranks; each rank prints who it is, its no_new_privs, the setuid id's euid and host.
probe='echo ids=$(id -u):$(id -g):$(id -G) $(grep NoNewPrivs /proc/self/status | tr -d "\t ") euid=$('"$WORK"'/suid/id -u) on $(hostname)'
{
  printf 'apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata:\n  name: asnobody\n'
  printf 'spec:\n  runtimeRef:\n    name: mpi-as-nobody\n  trainer:\n    numNodes: 2\n    numProcPerNode: 2\n'
  [ "$NETNS_MODE" = loopback ] && printf '    env:\n      - {name: OMPI_MCA_btl, value: "self,tcp"}\n'
  printf '    command:\n      - mpirun\n      - -np\n      - "4"\n      - /bin/sh\n      - -c\n'
  printf "      - '%s'\n" "$probe"
} > "$WORK/job.yaml"
"$CTL" apply -f "$WORK/job.yaml" >/dev/null
"$CTL" wait trainjob/asnobody --for=condition=Complete --timeout=120s >/dev/null ||
  fail "asnobody did not complete: $("$CTL" describe trainjob asnobody) $("$CTL" logs asnobody 2>&1)"
out=$("$CTL" logs asnobody)
want="ids=$NOBODY:$NOGROUP:$NOGROUP NoNewPrivs:1 euid=$NOBODY"
[ "$(grep -c "] $want on host" <<<"$out")" = 4 ] || fail "every rank must run as $NOBODY:$NOGROUP with no_new_privs: $out"
[ "$(grep -c " on host2$" <<<"$out")" = 2 ] || fail "two ranks must run on host2, under its orted: $out"
log "all 4 ranks ran as $NOBODY:$NOGROUP with no_new_privs, the 2 the orted on host2 started included"

# describe names the user the launcher's node runs its ranks as (the other runs only the orted).
d=$("$CTL" describe trainjob asnobody)
grep -A1 "^Runs as:" <<<"$d" | grep -Eq "^  node-[12] +nobody \(uid $NOBODY, gid $NOGROUP\)$" ||
  fail "describe must say who the launcher node's ranks run as: $d"
log "describe: the launcher node's ranks run as nobody (uid $NOBODY, gid $NOGROUP)"
