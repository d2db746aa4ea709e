# bench/mpi-launch/slurm_netns.sh (sourced by run.sh): a throw-away Slurm cluster on the
# benchmark's namespace hosts, so `srun --mpi=pmix` can be timed on the same three hosts.
#
#   munged      in the root namespace, its own key and socket in $SLURM_DIR (not /etc/munge,
#               not /run/munge: nothing of the machine's own munge or Slurm is touched)
#   slurmctld   in the root namespace, listening on the bridge address, a free port
#   slurmd      one per namespace host (NodeName hostN, NodeAddr = the host's veth address),
#               entered with `nsenter --net` + `unshare --uts` so its hostname is hostN, which
#               is how slurmd finds its NodeName (Debian's build has no --enable-multiple-slurmd,
#               so `slurmd -N` is not an option). nsenter rather than `ip netns exec`, which would
#               remount /sys and hide the cgroup tree slurmd 22.05 insists on loading.
# Every daemon runs in the foreground (-D/-F) as a child of the script, its PID in EXTRA_PIDS, so
# lib.sh's EXIT trap stops it; all files live under $WORK, which the trap removes.
#
# slurm_netns_up: sets SLURM_DIR, exports SLURM_CONF, returns non-zero with SLURM_WHY set (what
# failed, with the daemon's last log lines) when the cluster does not come up.

SLURM_WHY=""
SLURM_DIR=""

slurm_free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])'
}

slurm_netns_up() {
  local ctl_addr="$NETNS_SUBNET.1" i pid
  SLURM_DIR="$WORK/slurm"
  mkdir -p "$SLURM_DIR/ctld" "$SLURM_DIR/log"
  chmod 755 "$SLURM_DIR"
  for tool in slurmctld slurmd srun sinfo munged nsenter; do
    if ! command -v "$tool" >/dev/null && [ ! -x "/usr/sbin/$tool" ]; then
      SLURM_WHY="$tool not installed (apt-get install slurm-wlm munge)"
      return 1
    fi
  done
  if ! ls /usr/lib/x86_64-linux-gnu/slurm-wlm/mpi_pmix*.so >/dev/null 2>&1; then
    SLURM_WHY="Debian's slurm-wlm has no mpi_pmix plugin here (/usr/lib/x86_64-linux-gnu/slurm-wlm/mpi_pmix*.so)"
    return 1
  fi

  # munge: a key of our own, a socket of our own.
  dd if=/dev/urandom bs=1 count=1024 of="$SLURM_DIR/munge.key" status=none
  chmod 400 "$SLURM_DIR/munge.key"
  /usr/sbin/munged -F --force --key-file="$SLURM_DIR/munge.key" \
    --socket="$SLURM_DIR/munge.socket" --pid-file="$SLURM_DIR/munged.pid" \
    --log-file="$SLURM_DIR/log/munged.log" --seed-file="$SLURM_DIR/munge.seed" \
    > "$SLURM_DIR/log/munged.out" 2>&1 &
  EXTRA_PIDS+=($!)
  if ! wait_for 10 test -S "$SLURM_DIR/munge.socket"; then
    SLURM_WHY="munged did not start: $(tail -3 "$SLURM_DIR"/log/munged.* 2>/dev/null)"
    return 1
  fi

  local port ctl_host
  port=$(slurm_free_port)
  ctl_host=$(hostname -s)
  {
    echo "# bench/mpi-launch: three namespace hosts, for the srun --mpi=pmix contender only"
    echo "ClusterName=trainletbench"
    echo "SlurmctldHost=$ctl_host($ctl_addr)"
    echo "SlurmctldPort=$port"
    echo "SlurmdPort=6818"
    echo "SlurmUser=root"
    echo "SlurmdUser=root"; echo "SlurmdDebug=${SLURM_BENCH_DEBUG:-info}"
    echo "AuthType=auth/munge"
    echo "CredType=cred/munge"
    echo "AuthInfo=socket=$SLURM_DIR/munge.socket"
    echo "MpiDefault=none"
    echo "ProctrackType=proctrack/linuxproc"
    echo "TaskPlugin=task/none"
    echo "JobAcctGatherType=jobacct_gather/none"
    echo "AccountingStorageType=accounting_storage/none"
    echo "SchedulerType=sched/builtin"
    echo "SelectType=select/cons_tres"
    echo "SelectTypeParameters=CR_Core"
    echo "ReturnToService=2"
    echo "SlurmctldPidFile=$SLURM_DIR/slurmctld.pid"
    echo "SlurmdPidFile=$SLURM_DIR/slurmd.%n.pid"
    echo "StateSaveLocation=$SLURM_DIR/ctld"
    echo "SlurmdSpoolDir=$SLURM_DIR/spool.%n"
    echo "SlurmctldLogFile=$SLURM_DIR/log/slurmctld.log"
    echo "SlurmdLogFile=$SLURM_DIR/log/slurmd.%n.log"
    # The pmix plugin makes its client dir (spmix_appdir_UID_JOB.STEP) under TmpFS, the same
    # name on every node: one machine's /tmp would be shared by the three hosts, so each slurmd
    # gets its own directory mounted at this one path (see below).
    echo "TmpFS=$SLURM_DIR/tmp"
    for i in 1 2 3; do
      echo "NodeName=host$i NodeAddr=${NETNS_HOSTS[$((i - 1))]} NodeHostname=host$i CPUs=$(nproc) RealMemory=1 State=UNKNOWN"
    done
    echo "PartitionName=bench Nodes=host[1-3] Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:64"
  } > "$SLURM_DIR/slurm.conf"
  echo "CgroupPlugin=autodetect" > "$SLURM_DIR/cgroup.conf"
  export SLURM_CONF="$SLURM_DIR/slurm.conf"

  /usr/sbin/slurmctld -D -i -f "$SLURM_CONF" > "$SLURM_DIR/log/slurmctld.out" 2>&1 &
  EXTRA_PIDS+=($!)
  for i in 1 2 3; do
    mkdir -p "$SLURM_DIR/spool.host$i" "$SLURM_DIR/tmp.host$i" "$SLURM_DIR/tmp"
    nsenter --net="/run/netns/${NETNS_NAMES[$((i - 1))]}" \
      unshare --uts --mount --propagation private sh -c \
      "hostname host$i; mount --bind '$SLURM_DIR/tmp.host$i' '$SLURM_DIR/tmp'; exec \"\$0\" \"\$@\"" \
      /usr/sbin/slurmd -D -f "$SLURM_CONF" > "$SLURM_DIR/log/slurmd.host$i.out" 2>&1 &
    EXTRA_PIDS+=($!)
  done
  if ! wait_for 30 sh -c "[ \$(sinfo -h -p bench -t idle -o '%D' 2>/dev/null || echo 0) = 3 ]"; then
    SLURM_WHY="the three slurmds did not all become idle: $(sinfo 2>&1 | tr '\n' ';')
slurmctld: $(tail -5 "$SLURM_DIR/log/slurmctld.log" "$SLURM_DIR/log/slurmctld.out" 2>&1)
slurmd host2: $(tail -5 "$SLURM_DIR/log/slurmd.host2.log" "$SLURM_DIR/log/slurmd.host2.out" 2>&1)"
    return 1
  fi
  return 0
}

# slurm_netns_down: stops what our slurmds started and may have left (a slurmstepd of a step
# that did not end, its tasks), found by PID: every process whose environment names our
# SLURM_CONF (set before the daemons started, so they and whatever they start carry it). The
# daemons themselves are in EXTRA_PIDS. Called from run.sh's EXIT trap.
slurm_netns_down() {
  [ -n "$SLURM_DIR" ] || return 0
  local p pids=()
  for p in /proc/[0-9]*; do
    p=${p#/proc/}
    [ "$p" != $$ ] || continue
    if { tr '\0' '\n' < "/proc/$p/environ"; } 2>/dev/null | grep -qx "SLURM_CONF=$SLURM_DIR/slurm.conf"; then
      pids+=("$p")
    fi
  done
  [ ${#pids[@]} -gt 0 ] || return 0
  kill -TERM "${pids[@]}" 2>/dev/null || true
  sleep 0.5
  kill -KILL "${pids[@]}" 2>/dev/null || true
}
