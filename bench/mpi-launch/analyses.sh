# bench/mpi-launch/run.sh, sourced after the main table: the optional analyses of where the time
# goes (--profile, --trace, --probe). It uses run.sh's variables and functions and runs in its shell.

# ---- where each contender's time goes (optional) -----------------------------------------------
if [ "$PROFILE" = 1 ]; then
  echo
  mpicc_bin=$(command -v mpicc.openmpi || command -v mpicc) || fail "--profile needs mpicc (libopenmpi-dev)"
  "$mpicc_bin" -O2 "$HERE/launch_timing.c" -o "$WORK/launch-timing" || fail "launch_timing.c did not build"
  ALLREDUCE=$PROGRAM
  PROGRAM="$WORK/launch-timing"
  names=()
  for r in $(seq 1 "$REPS"); do
    run_direct "prof-direct-$r" > /dev/null
    [ -z "$BASE_PMIX" ] || { run_base "prof-base-$r" > /dev/null; names+=("prof-base-$r"); }
    run_trainlet "prof-mpirun-$r" > /dev/null
    run_ssh "prof-ssh-$r" > /dev/null
    [ -n "$SRUN_WHY" ] || run_srun "prof-srun-$r" > /dev/null
    names+=("prof-direct-$r" "prof-mpirun-$r" "prof-ssh-$r")
    [ -n "$SRUN_WHY" ] || names+=("prof-srun-$r")
    [ "$FLOOR" = 0 ] || { run_floor "prof-floor-$r" > /dev/null; names+=("prof-floor-$r"); }
  done
  PROGRAM=$ALLREDUCE
  profile_table 6 "${names[@]}"
  # One PMIx fence round, without MPI: fence_timing.c under trainlet-pmix (direct), orted
  # (mpirun) and slurmstepd (srun).
  if pkg-config --exists pmix && gcc -O2 "$HERE/fence_timing.c" -o "$WORK/fence-timing" \
      $(pkg-config --cflags --libs pmix); then
    PROGRAM="$WORK/fence-timing"
    RANK_LINE="fence rank "
    names=()
    for r in $(seq 1 "$REPS"); do
      run_direct "fence-direct-$r" > /dev/null
      [ -z "$BASE_PMIX" ] || { run_base "fence-base-$r" > /dev/null; names+=("fence-base-$r"); }
      run_trainlet "fence-mpirun-$r" > /dev/null
      [ -n "$SRUN_WHY" ] || run_srun "fence-srun-$r" > /dev/null
      names+=("fence-direct-$r" "fence-mpirun-$r")
      [ -n "$SRUN_WHY" ] || names+=("fence-srun-$r")
    done
    PROGRAM=$ALLREDUCE
    RANK_LINE=""
    python3 - "$WORK" "${names[@]}" <<'PYEOF'
import re, statistics, sys
work, names = sys.argv[1], sys.argv[2:]
rows = {}
for name in names:
    kind = name.split("-")[1]
    lines = re.findall(r"fence rank \d+ on \S+: init (\d+) data ([\d ]+) nodata ([\d ]+)",
                       open(f"{work}/{name}.out").read())
    init = statistics.median(int(l[0]) for l in lines)
    # Rounds 2..6: the ranks are in step after the first fence of each kind.
    data = statistics.median(int(x) for l in lines for x in l[1].split()[1:])
    nodata = statistics.median(int(x) for l in lines for x in l[2].split()[1:])
    rows.setdefault(kind, []).append((init, data, nodata))
label = {"direct": "direct (trainlet-pmix, rendezvous)",
         "base": "direct, --base-pmix's trainlet-pmix",
         "mpirun": "mpirun via trainlet-exec (orted)", "srun": "srun --mpi=pmix (slurmstepd)"}
print()
print(f"PMIx fence rounds, 3 hosts x 2 ranks, bare PMIx client: medians over ranks, rounds 2-6 "
      f"and {len(rows['direct'])} runs, ms")
print()
print("| launcher (PMIx server) | PMIx_Init | fence with data | fence without data |")
print("| --- | ---: | ---: | ---: |")
for k in ("direct", "base", "mpirun", "srun"):
    if k in rows:
        m = [statistics.median(r[i] for r in rows[k]) / 1000 for i in range(3)]
        print(f"| {label[k]} | {m[0]:.1f} | {m[1]:.1f} | {m[2]:.1f} |")
PYEOF
  else
    echo "profile: fence rounds not timed: no libpmix-dev (pkg-config pmix) or gcc"
  fi
fi

# ---- where each rank's time goes, by interposition (optional) ---------------------------------
if [ "$TRACE" = 1 ]; then
  echo
  mpicc_bin=$(command -v mpicc.openmpi || command -v mpicc) || fail "--trace needs mpicc (libopenmpi-dev)"
  pkg-config --exists pmix || fail "--trace needs libpmix-dev (pkg-config pmix)"
  # shellcheck disable=SC2046  # the flags are words
  gcc -O2 -shared -fPIC -o "$WORK/mpi-trace.so" "$HERE/mpi_trace.c" \
    $("$mpicc_bin" --showme:compile) $(pkg-config --cflags pmix) -ldl \
    || fail "mpi_trace.c did not build"
  TRACE_ENV=("LD_PRELOAD=$WORK/mpi-trace.so")
  SAVED_MPIRUN_ARGS=("${MPIRUN_ARGS[@]}")
  MPIRUN_ARGS+=(-x LD_PRELOAD)  # mpirun passes it on to every rank, local or remote
  names=()
  for r in $(seq 1 "$REPS"); do
    run_direct "trace-direct-$r" > /dev/null
    [ -z "$BASE_PMIX" ] || { run_base "trace-base-$r" > /dev/null; names+=("trace-base-$r"); }
    run_trainlet "trace-mpirun-$r" > /dev/null
    run_ssh "trace-ssh-$r" > /dev/null
    [ -n "$SRUN_WHY" ] || run_srun "trace-srun-$r" > /dev/null
    names+=("trace-direct-$r" "trace-mpirun-$r" "trace-ssh-$r")
    [ -n "$SRUN_WHY" ] || names+=("trace-srun-$r")
    [ "$FLOOR" = 0 ] || { run_floor "trace-floor-$r" > /dev/null; names+=("trace-floor-$r"); }
  done
  TRACE_ENV=()
  MPIRUN_ARGS=("${SAVED_MPIRUN_ARGS[@]}")
  python3 "$HERE/mpi_trace_table.py" "$WORK" "${names[@]}" || fail "mpi_trace_table.py failed"
fi

# ---- the CPU each process used, by kind (optional) ---------------------------------------------
# Each run under its own system-wide `perf record` of the scheduler's switches and forks, started
# before and stopped after the run (untimed); the run's window is its .times, moved to
# CLOCK_MONOTONIC. The benchmark's processes are those of this script, the coordinator, the agents
# and the sshds, and what they forked during the recording; cpu_budget.py sums their time on a CPU by kind.
if [ "$CPU" = 1 ]; then
  echo
  command -v perf > /dev/null || fail "--cpu needs perf (linux-perf)"
  # cpu_run KIND NAME: one run of contender KIND under perf; leaves NAME.perf.txt and NAME.window.
  cpu_run() {
    local kind=$1 name=$2 pid off t0 t1 ctl ack
    rm -f "$WORK/perf.ctl" "$WORK/perf.ack"
    mkfifo "$WORK/perf.ctl" "$WORK/perf.ack"
    # Started disabled and enabled through its control fifo, whose ack says the recording is on
    # (perf's own start takes 0.1-1 s here). 16 MiB per CPU: on 2 busy CPUs perf's reader falls
    # behind, and a lost fork hides whose a process is (cpu_budget.py shows such CPU apart).
    perf record -a -q -m 4096 -D -1 --control "fifo:$WORK/perf.ctl,$WORK/perf.ack" \
      -k CLOCK_MONOTONIC -e sched:sched_switch -e sched:sched_process_fork \
      -o "$WORK/$name.perf" > /dev/null 2>&1 &
    pid=$!
    exec {ctl}<>"$WORK/perf.ctl" {ack}<>"$WORK/perf.ack"
    echo enable >&"$ctl"
    read -r -t 30 _ <&"$ack" || fail "--cpu: perf record did not start"
    # Who is whose child when the recording starts (a standby step forked earlier, ...).
    ps -e -o pid=,ppid= > "$WORK/$name.ps"
    "run_$kind" "$name" > /dev/null
    sleep 0.1
    kill -INT "$pid"
    wait "$pid" || true
    exec {ctl}>&- {ack}>&-
    perf script -i "$WORK/$name.perf" -F pid,tid,cpu,time,event,trace > "$WORK/$name.perf.txt" 2>/dev/null
    rm -f "$WORK/$name.perf"
    off=$(python3 -c 'import time; print(time.time() - time.clock_gettime(time.CLOCK_MONOTONIC))')
    read -r t0 t1 < "$WORK/$name.times"
    awk -v a="$t0" -v b="$t1" -v o="$off" 'BEGIN { printf "%.6f %.6f\n", a - o, b - o }' \
      > "$WORK/$name.window"
  }
  names=()
  for r in $(seq 1 "$REPS"); do
    cpu_run direct "cpu-direct-$r"
    [ -z "$BASE_PMIX" ] || { cpu_run base "cpu-base-$r"; names+=("cpu-base-$r"); }
    cpu_run trainlet "cpu-mpirun-$r"
    cpu_run ssh "cpu-ssh-$r"
    names+=("cpu-direct-$r" "cpu-mpirun-$r" "cpu-ssh-$r")
    [ "$FLOOR" = 0 ] || { cpu_run floor "cpu-floor-$r"; names+=("cpu-floor-$r"); }
  done
  # EXTRA_PIDS: the coordinator, the agents and the sshds (started before the recordings).
  python3 "$HERE/cpu_budget.py" "$WORK" "${names[@]}" -- "$$" "${EXTRA_PIDS[@]}" \
    || fail "cpu_budget.py failed"
  if [ -n "$LOGS_DIR" ]; then
    mkdir -p "$LOGS_DIR" && cp "$WORK"/cpu-*.perf.txt "$WORK"/cpu-*.window "$WORK"/cpu-*.ps "$LOGS_DIR/"
    echo "$$" "${EXTRA_PIDS[@]}" > "$LOGS_DIR/cpu-roots"
  fi
  rm -f "$WORK"/cpu-*.perf.txt
fi

# ---- where the time goes (optional) -----------------------------------------------------------
if [ "$PROBE" = 1 ]; then
  echo
  echo "probe: the pieces, 5 samples each, median"
  # One ssh connection from host1 to host2 running `true`: TCP + key exchange + auth + session.
  ssh_samples=()
  for _ in 1 2 3 4 5; do
    t0=$(now)
    # shellcheck disable=SC2086
    "${ON_HOST1[@]}" $SSH_AGENT_CMD "${NETNS_HOSTS[1]}" true
    ssh_samples+=("$(elapsed_ms "$t0" "$(now)")")
  done
  # The MPI floor neither launcher can go under: all 6 ranks on host1, no remote daemon at all.
  local_samples=()
  for _ in 1 2 3 4 5; do
    t0=$(now)
    "${ON_HOST1[@]}" env "${SHARED_MCA[@]}" "${MPIRUN_ARGS[@]}" --oversubscribe \
      --host "${NETNS_HOSTS[0]}:6" \
      --mca btl_tcp_if_include "$SUBNET" --mca oob_tcp_if_include "$SUBNET" "$PROGRAM" \
      > "$WORK/local.out" 2>&1 || fail "mpirun on host1 alone: $(cat "$WORK/local.out")"
    local_samples+=("$(elapsed_ms "$t0" "$(now)")")
  done
  # The same 3 x 2 mpirun from host1, its remote daemons started by a launch agent that costs
  # nothing: `ip netns exec` into the host's namespace (own UTS namespace and hostname), no
  # network, no authentication. What a launcher, trainlet's or ssh, adds is its time over this.
  direct="$WORK/direct-agent"
  {
    printf '#!/bin/sh\n# rsh-style: [options] host command...\n'
    printf 'while [ "${1#-}" != "$1" ]; do shift; done\nh=$1; shift\ncase $h in\n'
    for i in 2 3; do
      printf '  %s) exec ip netns exec %s unshare --uts sh -c "hostname host%s; $*" ;;\n' \
        "${NETNS_HOSTS[$((i - 1))]}" "${NETNS_NAMES[$((i - 1))]}" "$i"
    done
    printf 'esac\necho "direct-agent: unknown host $h" >&2\nexit 255\n'
  } > "$direct"
  chmod +x "$direct"
  # The same, but the daemon in a session of its own, as sshd and trainlet's agents run it. On
  # one machine standing in for three, the scheduler shares the CPUs between sessions
  # (autogroup), not between processes: this, not the launch path, is most of what mpirun in a
  # trainlet job takes over the free launcher (bench/README.md).
  direct_setsid="$WORK/direct-agent-setsid"
  sed 's/unshare --uts sh -c/unshare --uts setsid -w sh -c/' "$direct" > "$direct_setsid"
  chmod +x "$direct_setsid"
  direct_samples=()
  setsid_samples=()
  for i in 1 2 3 4 5; do
    direct_samples+=("$(run_ssh "direct-$i" "$direct")")
    setsid_samples+=("$(run_ssh "setsid-$i" "$direct_setsid")")
  done
  # Inside a trainlet job on host1: trainlet-exec to host2 running `true`, then mpirun alone.
  probe="$WORK/probe.yaml"
  {
    printf 'apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata:\n  name: bench-probe\n'
    printf 'spec:\n  runtimeRef:\n    name: mpi-distributed\n  trainer:\n'
    printf '    numNodes: 3\n    numProcPerNode: 2\n    env:\n'
    job_env_yaml
    printf '    command:\n      - /bin/sh\n      - -c\n      - |\n'
    printf '        for i in 1 2 3 4 5; do a=$(date +%%s%%N); "%s" %s true; b=$(date +%%s%%N); echo "exec_ns=$((b - a))"; done\n' \
      "$BIN_DIR/trainlet-exec" "${NETNS_HOSTS[1]}"
    printf '        for i in 1 2 3 4 5; do a=$(date +%%s%%N); %s "%s" > /dev/null; b=$(date +%%s%%N); echo "mpirun_ns=$((b - a))"; done\n' \
      "${MPIRUN_ARGS[*]}" "$PROGRAM"
    printf '        for i in 1 2 3 4 5; do a=$(date +%%s%%N); OMPI_MCA_plm_rsh_agent=%s %s "%s" > /dev/null; b=$(date +%%s%%N); echo "direct_in_job_ns=$((b - a))"; done\n' \
      "$direct" "${MPIRUN_ARGS[*]}" "$PROGRAM"
  } > "$probe"
  "$CTL" apply -f "$probe" > /dev/null
  "$CTL" wait trainjob/bench-probe --for=condition=Complete --timeout=180s > /dev/null \
    || fail "probe job: $("$CTL" logs bench-probe 2>&1)"
  plog=$("$CTL" logs bench-probe)
  python3 - "${ssh_samples[*]}" "$plog" "${local_samples[*]}" "${direct_samples[*]}" \
    "${setsid_samples[*]}" <<'EOF'
import statistics, sys
ssh = [float(x) for x in sys.argv[1].split()]
local = [float(x) for x in sys.argv[3].split()]
direct = [float(x) for x in sys.argv[4].split()]
setsid = [float(x) for x in sys.argv[5].split()]
lines = sys.argv[2].splitlines()
def grab(key):
    return [int(l.split(key + "=")[1]) / 1e6 for l in lines if key + "=" in l]
ex, mp, dj = grab("exec_ns"), grab("mpirun_ns"), grab("direct_in_job_ns")
if len(ex) != 5 or len(mp) != 5 or len(dj) != 5:
    sys.exit(f"probe: expected 5 samples of each, got {len(ex)} exec and {len(mp)} mpirun:\n{sys.argv[2]}")
print(f"ssh host1 -> host2 `true`:                 {statistics.median(ssh):.0f} ms")
print(f"trainlet-exec host1 -> host2 `true`:       {statistics.median(ex):.0f} ms")
print(f"mpirun alone inside a trainlet job:        {statistics.median(mp):.0f} ms")
print(f"mpirun, launch agent `ip netns exec`:      {statistics.median(direct):.0f} ms")
print(f"  the same, run from inside a trainlet job: {statistics.median(dj):.0f} ms")
print(f"  the same, each daemon in its own session:  {statistics.median(setsid):.0f} ms")
print(f"mpirun, all 6 ranks on host1 (no remote):  {statistics.median(local):.0f} ms")
EOF
  "$CTL" delete trainjob bench-probe --timeout 60s > /dev/null
  # The control plane alone: the same 3 x 2 job on mpi-distributed whose command is /bin/true.
  true_samples=()
  for i in 1 2 3 4 5; do
    f=$(write_trainjob "bench-true-$i" /bin/true)
    t0=$(now)
    "$CTL" apply -f "$f" > /dev/null
    "$CTL" wait "trainjob/bench-true-$i" --for=condition=Complete --timeout=60s > /dev/null \
      || fail "probe job bench-true-$i did not complete"
    true_samples+=("$(elapsed_ms "$t0" "$(now)")")
    "$CTL" delete trainjob "bench-true-$i" --timeout 60s > /dev/null
  done
  python3 -c 'import statistics, sys; print(f"trainlet apply -> Complete, /bin/true:    {statistics.median(map(float, sys.argv[1:])):.0f} ms")' \
    "${true_samples[@]}"
fi
