#!/usr/bin/env python3
"""cpu_budget: the CPU each process of a run used, by kind, for run.sh --cpu.

Reads `perf script -F pid,tid,cpu,time,event,trace` of a system-wide `perf record -k
CLOCK_MONOTONIC -e sched:sched_switch -e sched:sched_process_fork` (one file per run), and sums
each thread's time on a CPU (from its switch-in to its switch-out, on that CPU) inside the run's
window. A thread counts for its process (its thread group); a process counts as the benchmark's
when it is one of the ROOT pids or descends from one of them, by the process tree at the start of
the recording (OUT_DIR/NAME.ps: `ps -e -o pid=,ppid=`) and the forks recorded since; the rest is
other load on the machine. Processes are sorted into kinds by their command name:
ranks, trainlet-pmix, trainlet-step, trainlet-agent, the coordinator, trainletctl, trainlet-exec,
mpirun, orted, ssh, sshd, the floor's python harness, and "other (shell, ip, ...)".

usage: cpu_budget.py OUT_DIR NAME... -- ROOT_PID...
  OUT_DIR/NAME.perf.txt  the perf script text of run NAME (<contender>-<...>: cpu-direct-3)
  OUT_DIR/NAME.window    "T0 T1", CLOCK_MONOTONIC seconds: the timed span of the run
Prints, per contender, the medians over its runs of each kind's CPU in ms, the wall, and the
CPU time left idle in the window (wall x CPUs - busy).
"""
import os
import re
import statistics
import sys

SWITCH = re.compile(r"^\s*(\d+)/(\d+)\s+\[(\d+)\]\s+([\d.]+):\s+sched:sched_switch:\s+"
                    r"prev_comm=(.*?) prev_pid=(\d+) .* ==> next_comm=(.*?) next_pid=(\d+) ")
FORK = re.compile(r"^\s*(\d+)/(\d+)\s+\[(\d+)\]\s+([\d.]+):\s+sched:sched_process_fork:\s+"
                  r"comm=.*? pid=(\d+) child_comm=(.*?) child_pid=(\d+)")

KINDS = [  # (label, command names)
    ("ranks (MPI program)", ("mpi-allreduce", "launch-timing")),
    ("trainlet-pmix", ("trainlet-pmix",)),
    ("trainlet-step", ("trainlet-step",)),
    ("trainlet-agent", ("trainlet-agent",)),
    ("trainlet-coordinator", ("trainlet-coordi", "trainlet-coordinator")),
    ("trainletctl (CLI)", ("trainletctl",)),
    ("trainlet-exec", ("trainlet-exec",)),
    ("mpirun", ("mpirun",)),
    ("orted", ("orted",)),
    ("ssh", ("ssh",)),
    ("sshd", ("sshd",)),
    ("floor harness (python)", ("python3",)),
]
# Kinds whose CPU is also shown by thread name (a second table).
THREADS_OF = ("trainlet-pmix", "trainlet-step", "trainlet-agent", "trainlet-coordinator")
OTHER_MINE = "other of the run (shell, ip, env, ...)"
NOT_MINE = "other load on the machine"
UNKNOWN = "of unknown parent (the recording lost a fork)"


def kind_of(comm):
    for label, names in KINDS:
        if comm in names:
            return label
    return OTHER_MINE


def one_run(path, t0, t1, roots, ps):
    last_switch = {}   # cpu -> time of the last switch on it
    runtime = {}       # tid -> seconds on a CPU inside [t0, t1]
    tgid = {}          # tid -> pid (thread group)
    comm = {}          # pid -> command name (its main thread's, last seen)
    tcomm = {}         # tid -> the thread's own name, last seen
    forks = []         # (parent tgid, child tid)
    ncpu = 0
    first = None
    with open(path, errors="replace") as f:
        for line in f:
            m = SWITCH.match(line)
            if m:
                pid, tid, cpu, t = int(m[1]), int(m[2]), int(m[3]), float(m[4])
                if first is None:
                    first = t
                    if t > t0:
                        sys.exit(f"cpu_budget: {path}: the recording began {(t - t0) * 1000:.0f} "
                                 "ms into the run")
                ncpu = max(ncpu, cpu + 1)
                tgid[tid] = pid
                tcomm[tid] = m[5]
                if tid == pid:
                    comm[pid] = m[5]
                start = last_switch.get(cpu)
                if start is not None and tid != 0:
                    lo, hi = max(start, t0), min(t, t1)
                    if hi > lo:
                        runtime[tid] = runtime.get(tid, 0.0) + (hi - lo)
                last_switch[cpu] = t
                continue
            m = FORK.match(line)
            if m:
                forks.append((int(m[1]), int(m[7])))
    parent = {}
    for p, pp in ps:
        parent[p] = pp
    for ptgid, child in forks:
        if tgid.get(child, child) == child and child != ptgid:
            parent[child] = ptgid
    mine_cache = {}

    known = set(parent) | set(parent.values())

    def mine(p):  # True, False, or None: its chain ends at a pid nothing recorded (a lost fork)
        seen = []
        while p not in mine_cache:
            if p in roots:
                mine_cache[p] = True
                break
            seen.append(p)
            if p not in parent:
                mine_cache[p] = False if p in known or p <= 1 else None
                break
            p = parent[p]
        for s in seen:
            mine_cache[s] = mine_cache[p]
        return mine_cache[p]

    out = {}
    for tid, secs in runtime.items():
        p = tgid.get(tid, tid)
        m = mine(p)
        k = kind_of(comm.get(p, "")) if m else NOT_MINE if m is False else UNKNOWN
        out[k] = out.get(k, 0.0) + secs * 1000
        if m and k in THREADS_OF:
            key = f"{k}: {tcomm.get(tid, '?')}"
            out[key] = out.get(key, 0.0) + secs * 1000
    wall = (t1 - t0) * 1000
    busy = sum(out.values())
    out["wall"] = wall
    out["idle CPU (wall x CPUs - busy)"] = max(0.0, wall * max(ncpu, 1) - busy)
    return out, ncpu


def main():
    args = sys.argv[1:]
    if "--" not in args:
        sys.exit(__doc__)
    sep = args.index("--")
    work, names, roots = args[0], args[1:sep], {int(x) for x in args[sep + 1:]}
    per_kind = {}
    ncpu = 0
    for name in names:
        t0, t1 = (float(x) for x in open(f"{work}/{name}.window").read().split())
        ps = [tuple(int(x) for x in l.split()) for l in open(f"{work}/{name}.ps") if l.strip()]
        row, n = one_run(f"{work}/{name}.perf.txt", t0, t1, roots, ps)
        ncpu = max(ncpu, n)
        per_kind.setdefault(name.split("-")[1], []).append(row)
    kinds = [k for k in ("direct", "base", "mpirun", "ssh", "floor") if k in per_kind]
    label = {"direct": "direct", "base": "direct, base", "mpirun": "mpirun via trainlet-exec",
             "ssh": "mpirun over SSH", "floor": "MPI floor (no launcher)"}
    keys = ["wall"] + [k for k, _ in KINDS] + [OTHER_MINE, NOT_MINE, UNKNOWN,
                                                "idle CPU (wall x CPUs - busy)"]
    print(f"CPU used inside each timed run, by process kind (perf sched_switch, {ncpu} CPUs): "
          f"medians over {len(per_kind[kinds[0]])} runs each, ms")
    print()
    print("| | " + " | ".join(label[k] for k in kinds) + " |")
    print("| --- |" + " ---: |" * len(kinds))
    for key in keys:
        vals = [statistics.median(r.get(key, 0.0) for r in per_kind[k]) for k in kinds]
        if key not in ("wall",) and all(v < 0.05 for v in vals):
            continue
        print(f"| {key} | " + " | ".join(f"{v:.1f}" for v in vals) + " |")
    mine_keys = [k for k, _ in KINDS] + [OTHER_MINE]
    tl = ["trainlet-pmix", "trainlet-step", "trainlet-agent", "trainlet-coordinator",
          "trainletctl (CLI)", "trainlet-exec"]
    print("| **all of the run's processes** | " + " | ".join(
        f"{statistics.median(sum(r.get(x, 0.0) for x in mine_keys) for r in per_kind[k]):.1f}"
        for k in kinds) + " |")
    tl_rows = "| **trainlet's processes** | " + " | ".join(
        f"{statistics.median(sum(r.get(x, 0.0) for x in tl) for r in per_kind[k]):.1f}"
        for k in kinds) + " |"
    print(tl_rows)
    threads = sorted({t for k in kinds for r in per_kind[k] for t in r if ": " in t})
    if threads:
        print()
        print("| trainlet's CPU by thread name | " + " | ".join(label[k] for k in kinds) + " |")
        print("| --- |" + " ---: |" * len(kinds))
        for t in threads:
            vals = [statistics.median(r.get(t, 0.0) for r in per_kind[k]) for k in kinds]
            if max(vals) >= 0.5:
                print(f"| {t} | " + " | ".join(f"{v:.1f}" for v in vals) + " |")


if __name__ == "__main__":
    main()
