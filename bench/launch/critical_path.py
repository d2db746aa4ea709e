#!/usr/bin/env python3
# The wall-clock critical path of `trainletctl apply -f job.yaml --wait` for an N-rank /bin/true
# job on a one-agent local cluster, from kernel events alone (no change to trainlet): `perf
# record -a` of the scheduler's exec/fork/exit/switch tracepoints and of the few system calls
# that mark a hand-over between the processes (ZeroMQ's send/recv on its TCP sockets, writes,
# fdatasync, connect, waits). For each launch it finds the milestones below and prints, per span
# between two of them, the median ms over the launches and what the 2 CPUs did meanwhile: ran
# this launch's processes (CLI, coordinator, agent, step, ranks), ran anything else, or idled.
# A span in which the CPUs mostly idle is a wait on a timer, a device (fsync) or a sleep, not on a
# CPU.
#
#   bench/launch/critical_path.py BIN_DIR [LAUNCHES=10] [RANKS=64] [--keep PERF_SCRIPT_FILE]
#       [--annotate KEY=VALUE]...
#   bench/launch/critical_path.py --from PERF_SCRIPT_FILE COORD_PID AGENT_PID BIN_DIR
#
# Needs root (perf -a) and the tracefs. Every process it starts is stopped by pid: the cluster
# with `trainletctl local down`, perf with SIGINT. See bench/README.md.
import bisect, os, re, shutil, signal, statistics, subprocess, sys, tempfile, time

# x86_64 system call numbers recorded (filtered in the kernel, so the trace stays small).
SYSCALLS = [0, 1, 42, 44, 45, 61, 75, 247]
READ, WRITE, CONNECT, SENDTO, RECVFROM, WAIT4, FDATASYNC, WAITID = SYSCALLS


ANNOTATIONS = {}  # --annotate KEY=VALUE: on every job (e.g. trainlet.io/binding=none)


def job_yaml(path, name, ranks, agents=1):
    notes = "".join(f"\n    {k}: \"{v}\"" for k, v in ANNOTATIONS.items())
    notes = f"\n  annotations:{notes}" if notes else ""
    with open(path, "w") as f:
        f.write(f"""apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: {name}{notes}
spec:
  runtimeRef:
    name: plain
  trainer:
    numNodes: {agents}
    numProcPerNode: {ranks // agents}
    command: ["/bin/true"]
""")


def record_launches(bin_dir, launches, ranks, out_script, agents=1, after_each=None,
                    prefix="trainlet-critpath-", buffer="8M"):
    """A local cluster of `agents` agents; two untimed warm-up launches, then `launches` timed
    `apply --wait` of `ranks` /bin/true under `perf record -a` (scheduler and the SYSCALLS),
    `after_each()` after each one's delete; the trace as `perf script` text in `out_script`.
    Returns the wall times (ms), the coordinator's pid and the set of the agents' pids."""
    d = tempfile.mkdtemp(prefix=prefix)
    ctl = os.path.join(bin_dir, "trainletctl")
    env = dict(os.environ, TRAINLET_HOME=d)
    perf = None
    walls = []
    try:
        subprocess.run([ctl, "local", "up", "--agents", str(agents), "--slots",
                        str(ranks // agents), "--dir", d, "--timeout", "60"], check=True,
                       capture_output=True)
        pids = {}
        for f in os.listdir(f"{d}/pids"):
            pids[f] = int(open(f"{d}/pids/{f}").read().split()[0])
        coord = pids.pop("coordinator.pid")
        agent_pids = set(pids.values())
        for w in range(2):
            job_yaml(f"{d}/w{w}.yaml", f"w{w}", ranks, agents)
            subprocess.run([ctl, "apply", "-f", f"{d}/w{w}.yaml", "--wait"], env=env, check=True,
                           capture_output=True)
            subprocess.run([ctl, "delete", "trainjob", f"w{w}"], env=env, check=True,
                           capture_output=True)
        ids = " || ".join(f"id == {i}" for i in SYSCALLS)
        # perf's own reads and writes are left out by its pid ($$ of the shell it replaces).
        cmd = ("exec perf record -a -q -o '%s/perf.data' -m %s "
               "-e sched:sched_process_exec -e sched:sched_process_fork "
               "-e sched:sched_process_exit -e sched:sched_switch "
               "-e raw_syscalls:sys_enter --filter \"common_pid != $$ && (%s)\" "
               "-e raw_syscalls:sys_exit --filter \"common_pid != $$ && (%s)\"" %
               (d, buffer, ids, ids))
        perf = subprocess.Popen(["sh", "-c", cmd], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        time.sleep(1.0)
        for i in range(launches):
            job_yaml(f"{d}/j{i}.yaml", f"j{i}", ranks, agents)
            t = time.perf_counter()
            subprocess.run([ctl, "apply", "-f", f"{d}/j{i}.yaml", "--wait"], env=env, check=True,
                           capture_output=True)
            walls.append((time.perf_counter() - t) * 1000)
            time.sleep(0.2)
            subprocess.run([ctl, "delete", "trainjob", f"j{i}"], env=env, check=True,
                           capture_output=True)
            time.sleep(0.3)
            if after_each is not None:
                after_each()
        perf.send_signal(signal.SIGINT)
        perf.wait(timeout=120)
        perf = None
        with open(out_script, "w") as f:
            subprocess.run(["perf", "script", "-i", f"{d}/perf.data", "-F",
                            "comm,pid,tid,cpu,time,event,trace"], stdout=f,
                           stderr=subprocess.DEVNULL, check=True)
    finally:
        if perf is not None:
            perf.send_signal(signal.SIGINT)
            perf.wait(timeout=120)
        subprocess.run([ctl, "local", "down", "--dir", d], capture_output=True)
        shutil.rmtree(d, ignore_errors=True)
    return walls, coord, agent_pids


def record(bin_dir, launches, ranks, out_script):
    walls, coord, agents = record_launches(bin_dir, launches, ranks, out_script)
    return walls, coord, next(iter(agents))


LINE = re.compile(r"^\s*(.+?)\s+(\d+)/(\d+)\s+\[(\d+)\]\s+([\d.]+):\s+(\S+):\s*(.*)$")
SWITCH = re.compile(r"prev_pid=(\d+) .*prev_state=(\S+) ==> next_comm=.* next_pid=(\d+)")


class Ev:
    __slots__ = ("t", "comm", "pid", "tid", "cpu", "name", "nr", "args", "ret", "rest")


def parse(path):
    out = []
    with open(path) as f:
        for line in f:
            m = LINE.match(line)
            if not m:
                continue
            e = Ev()
            e.comm, pid, tid, cpu, t, e.name, e.rest = m.groups()
            e.t, e.pid, e.tid, e.cpu = float(t) * 1000.0, int(pid), int(tid), int(cpu)
            e.nr = e.ret = None
            e.args = None
            if e.name == "raw_syscalls:sys_enter":
                mm = re.match(r"NR (\d+) \((.*)\)", e.rest)
                e.nr, e.args = int(mm.group(1)), [int(x, 16) for x in mm.group(2).split(", ")]
            elif e.name == "raw_syscalls:sys_exit":
                mm = re.match(r"NR (\d+) = (-?\d+)", e.rest)
                e.nr, e.ret = int(mm.group(1)), int(mm.group(2))
            out.append(e)
    return out


def milestones(events, coord, agent, bin_dir):
    """One dict of milestone -> ms per apply launch (this build's CLI execs alternate apply,
    delete). A standby step (agent/standby_step.h) was started before its launch: its launch has
    "agent handed over" and "step read its dir" where a cold one has "agent fork step" and
    "step exec"."""
    prefix = "filename=" + bin_dir.rstrip("/") + "/"
    ctl_execs = [(e.t, e.pid) for e in events if e.name == "sched:sched_process_exec"
                 and (prefix + "trainletctl ") in e.rest + " "]
    steps = {e.pid for e in events if e.name == "sched:sched_process_exec"
             and (prefix + "trainlet-step ") in e.rest + " "}
    parent = {}
    for e in events:
        if e.name == "sched:sched_process_fork":
            parent[int(re.search(r"child_pid=(\d+)", e.rest).group(1))] = e.pid
    result = []
    for k in range(0, len(ctl_execs), 2):
        t0, cli = ctl_execs[k]
        t_end = ctl_execs[k + 1][0] if k + 1 < len(ctl_execs) else float("inf")
        m = {"CLI exec": t0}
        step = None
        enter = {}
        syncs = []
        for e in events:
            if e.t < t0 or e.t > t_end:
                continue
            if e.name == "raw_syscalls:sys_enter":
                enter[e.tid] = e
                continue
            if e.name == "raw_syscalls:sys_exit":
                s = enter.pop(e.tid, None)
                if e.pid == cli:
                    if e.nr == CONNECT:
                        m.setdefault("CLI connect()", e.t)
                    if e.nr == SENDTO and e.ret > 280 and "CLI connect()" in m:
                        # the apply (CURVE's own INITIATE is 301 bytes, before READY)
                        m.setdefault("CLI sent apply", e.t) if "_ready" in m else None
                    if e.nr == RECVFROM and e.ret > 0 and "CLI connect()" in m:
                        m.setdefault("_ready", e.t) if e.ret < 100 else None
                    if e.nr == RECVFROM and e.ret > 0 and "coord Complete synced" in m:
                        m.setdefault("CLI recv answer", e.t)
                elif e.pid == coord:
                    if e.nr == RECVFROM and e.ret > 280 and "CLI sent apply" in m:
                        m.setdefault("coord recv apply", e.t)
                    if e.nr == FDATASYNC and s is not None:
                        syncs.append((s.t, e.t))
                        if "coord recv apply" in m and "agent recv plan" not in m:
                            m["coord apply synced"] = e.t
                        if "coord recv last exit" in m:
                            m.setdefault("coord Complete synced", e.t)
                    if e.nr == RECVFROM and e.ret > 0 and "agent sent last exit" in m:
                        m.setdefault("coord recv last exit", e.t)
                    if e.nr == SENDTO and e.ret > 1000 and "coord Complete synced" in m:
                        m.setdefault("coord sent answer", e.t)  # the job's status, to the CLI
                elif e.pid == agent:
                    if e.nr == RECVFROM and e.ret > 1000 and "coord recv apply" in m:
                        m.setdefault("agent recv plan", e.t)
                    if e.nr == SENDTO and e.tid == agent and "agent recv plan" in m:
                        m.setdefault("agent handed over", e.t)
                    if e.nr == SENDTO and e.ret > 0 and "step wrote last exit" in m:
                        m.setdefault("agent sent last exit", e.t)
                elif e.pid in steps:
                    if e.nr == READ and s is not None and s.args[0] == 1 and e.ret == 1 \
                            and "agent handed over" in m:
                        m["step read its dir"] = e.t  # byte by byte: the last one is the '\n'
                        step = e.pid
                    if e.pid == step and e.nr == WRITE and e.ret > 0 and e.tid != step:
                        m["step cgroup entered"] = e.t  # the enter thread's cgroup.procs write
                    if e.pid == step and e.nr == WRITE and "last rank exit" in m and \
                            m["last rank exit"] < e.t and "step wrote last exit" not in m:
                        m["step wrote last exit"] = e.t
                continue
            if e.name == "sched:sched_process_fork":
                child = int(re.search(r"child_pid=(\d+)", e.rest).group(1))
                if e.pid == agent and e.tid == agent and "agent recv plan" in m \
                        and child in steps and "agent fork step" not in m:
                    m["agent fork step"] = e.t
                    step = child
            elif e.name == "sched:sched_process_exec":
                if e.pid == step:
                    m.setdefault("step exec", e.t)
                elif step is None and parent.get(e.pid) in steps and "agent handed over" in m:
                    # a standby step whose read of its dir was not seen: its first rank names it
                    step = parent[e.pid]
                    m.setdefault("first rank exec", e.t)
                    m["last rank exec"] = e.t
                elif step is not None and parent.get(e.pid) == step:
                    m.setdefault("first rank exec", e.t)
                    m["last rank exec"] = e.t
            elif e.name == "sched:sched_process_exit":
                if step is not None and parent.get(e.pid) == step and e.tid == e.pid \
                        and "first rank exec" in m:
                    m["last rank exit"] = e.t
                if e.pid == cli and e.tid == cli:
                    m["CLI exit"] = e.t
        m.pop("_ready", None)
        m["_syncs"] = syncs
        result.append(m)
    return result


class CpuTimeline:
    """Per CPU, the sched_switch times and who ran after each, for cpu_split."""

    def __init__(self, events, ncpu=2):
        self.ncpu = ncpu
        self.t = [[] for _ in range(ncpu)]
        self.next = [[] for _ in range(ncpu)]
        for e in events:
            if e.name != "sched:sched_switch" or e.cpu >= ncpu:
                continue
            mm = SWITCH.search(e.rest)
            if mm:
                self.t[e.cpu].append(e.t)
                self.next[e.cpu].append(int(mm.group(3)))

    def split(self, a, b, ours):
        """Fractions of [a, b] x ncpu spent running our tids, other tids, and idle."""
        run = {"ours": 0.0, "other": 0.0, "idle": 0.0}
        for cpu in range(self.ncpu):
            ts, nx = self.t[cpu], self.next[cpu]
            i = bisect.bisect_left(ts, a)
            cur = nx[i - 1] if i > 0 else 0
            last = a
            while i < len(ts) and ts[i] <= b:
                who = "idle" if cur == 0 else ("ours" if cur in ours else "other")
                run[who] += ts[i] - last
                last, cur = ts[i], nx[i]
                i += 1
            who = "idle" if cur == 0 else ("ours" if cur in ours else "other")
            run[who] += b - last
        total = self.ncpu * (b - a)
        return {k: (v / total if total > 0 else 0.0) for k, v in run.items()}


def report(events, coord, agent, walls, bin_dir):
    # Every tid of this cluster's processes and of the CLIs, steps and ranks (fork children).
    tgid = {}
    for e in events:
        tgid[e.tid] = e.pid
    roots = {coord, agent}
    ours = set()
    children = {}
    for e in events:
        if e.name == "sched:sched_process_fork":
            children.setdefault(e.pid, []).append(int(re.search(r"child_pid=(\d+)", e.rest).group(1)))
    for e in events:
        if e.name == "sched:sched_process_exec" and ("filename=" + bin_dir.rstrip("/") +
                                                     "/trainlet") in e.rest:
            roots.add(e.pid)
    stack = list(roots)
    while stack:
        p = stack.pop()
        if p in ours:
            continue
        ours.add(p)
        stack.extend(children.get(p, []))
    ours |= {tid for tid, pid in tgid.items() if pid in ours}
    ms = milestones(events, coord, agent, bin_dir)
    cpus = CpuTimeline(events)
    cpu_split = lambda events_, a, b, ours_: cpus.split(a, b, ours_)
    spans = {}
    at = {}
    for m in ms:
        pts = sorted(((v, k) for k, v in m.items() if not k.startswith("_")))
        for (ta, ka), (tb, kb) in zip(pts, pts[1:]):
            spans.setdefault((ka, kb), []).append((tb - ta, cpu_split(events, ta, tb, ours)))
        for k, v in m.items():
            if not k.startswith("_"):
                at.setdefault(k, []).append(v - m["CLI exec"])
    print(f"{len(ms)} launches" + (f"; apply --wait as timed by the script: median "
                                   f"{statistics.median(walls):.1f} ms" if walls else ""))
    print()
    print("| milestone | at ms (median) |")
    print("| --- | ---: |")
    for k in sorted(at, key=lambda k: statistics.median(at[k])):
        print(f"| {k} | {statistics.median(at[k]):.1f} |")
    print()
    print("| span (consecutive milestones) | n | median ms | min | max | CPU: ours / other / idle |")
    print("| --- | ---: | ---: | ---: | ---: | --- |")
    for k in sorted(spans, key=lambda k: -len(spans[k])):
        v = spans[k]
        if len(v) < max(2, len(ms) // 3):
            continue
        d = [x[0] for x in v]
        o = statistics.median(x[1]["ours"] for x in v)
        t = statistics.median(x[1]["other"] for x in v)
        i = statistics.median(x[1]["idle"] for x in v)
        print(f"| {k[0]} -> {k[1]} | {len(v)} | {statistics.median(d):.2f} | {min(d):.2f} | "
              f"{max(d):.2f} | {o*100:.0f}% / {t*100:.0f}% / {i*100:.0f}% |")
    total = [(m["CLI exit"] - m["CLI exec"], cpu_split(events, m["CLI exec"], m["CLI exit"], ours))
             for m in ms if "CLI exit" in m]
    if total:
        d = [x[0] for x in total]
        print(f"| CLI exec -> CLI exit (whole) | {len(d)} | {statistics.median(d):.2f} | "
              f"{min(d):.2f} | {max(d):.2f} | "
              f"{statistics.median(x[1]['ours'] for x in total)*100:.0f}% / "
              f"{statistics.median(x[1]['other'] for x in total)*100:.0f}% / "
              f"{statistics.median(x[1]['idle'] for x in total)*100:.0f}% |")
    syncs = [b - a for m in ms for a, b in m["_syncs"]]
    if syncs:
        print(f"\ncoordinator fdatasyncs per launch window: {len(syncs) / len(ms):.1f}, median "
              f"{statistics.median(syncs):.2f} ms, max {max(syncs):.2f} ms")


def main():
    args = list(sys.argv[1:])
    keep = None
    while "--annotate" in args:
        i = args.index("--annotate")
        key, _, value = args[i + 1].partition("=")
        ANNOTATIONS[key] = value
        del args[i:i + 2]
    if "--keep" in args:
        i = args.index("--keep")
        keep = args[i + 1]
        del args[i:i + 2]
    if args and args[0] == "--from":
        events = parse(args[1])
        report(events, int(args[2]), int(args[3]), [], args[4])
        return
    bin_dir = os.path.abspath(args[0])
    launches = int(args[1]) if len(args) > 1 else 10
    ranks = int(args[2]) if len(args) > 2 else 64
    script = keep or tempfile.mktemp(prefix="critpath-", suffix=".txt")
    walls, coord, agent = record(bin_dir, launches, ranks, script)
    print(f"coordinator pid {coord}, agent pid {agent}")
    events = parse(script)
    report(events, coord, agent, walls, bin_dir)
    if not keep:
        os.unlink(script)


if __name__ == "__main__":
    main()
