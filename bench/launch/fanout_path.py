#!/usr/bin/env python3
# Where a launch on several agents (the 256x8 configuration of trainlet-launch-bench) spends its
# time, from kernel events alone (no change to trainlet), in the manner of critical_path.py:
# `perf record -a` of the scheduler's exec/fork/exit/switch tracepoints and of send/recv, read/write
# and fdatasync, over LAUNCHES launches of `trainletctl apply -f job.yaml --wait` of RANKS /bin/true
# ranks on AGENTS agents of one local cluster, each launch followed (untimed) by a posix_spawn loop
# of the same RANKS /bin/true, the floor.
#
# Prints, per launch (medians over the launches):
#  - the milestones of the launch in time order, those of the agents as the first and the last
#    agent to reach each one (the fan-out of the plans, the agents' step starts, their spawns,
#    their completion reports), so the spread between agents is the cost of the fan-out;
#  - the CPU time of each part (CLI, coordinator, agents, steps, ranks, others) over the whole
#    launch, against the floor's (its spawner and its ranks): on 2 CPUs a launch that keeps both
#    busy is as long as its CPU time divided by 2, whatever its order.
#
#   bench/launch/fanout_path.py BIN_DIR [LAUNCHES=6] [RANKS=256] [AGENTS=8] [--keep FILE]
#
# Needs root (perf -a) and the tracefs. Every process it starts is stopped by pid: the cluster
# with `trainletctl local down`, perf with SIGINT. See bench/README.md.
import os, re, shutil, signal, statistics, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from critical_path import (SYSCALLS, READ, WRITE, CONNECT, SENDTO, RECVFROM, FDATASYNC,
                           SWITCH, parse, record_launches)

FLOOR_MARK = "/tmp/trainlet-fanout-floor-mark"  # the floor's spawner execs this first (a marker)


FLOOR = r"""
import os, sys
n = int(sys.argv[1])
os.posix_spawn(sys.argv[2], [sys.argv[2]], {})
os.wait()
pids = [os.posix_spawn("/bin/true", ["/bin/true"], dict(os.environ)) for _ in range(n)]
for p in pids: os.waitpid(p, 0)
"""


def record(bin_dir, launches, ranks, agents, out_script):
    """critical_path's recording on `agents` agents, with the floor's spawner run after each
    launch so that its spawns are in the same trace."""
    if not os.path.islink(FLOOR_MARK):
        os.symlink("/bin/true", FLOOR_MARK)

    def floor():
        subprocess.run([sys.executable, "-c", FLOOR, str(ranks), FLOOR_MARK], check=True)
        time.sleep(0.3)

    return record_launches(bin_dir, launches, ranks, out_script, agents=agents, after_each=floor,
                           prefix="trainlet-fanout-", buffer="16M")


def run_time(events, t0, t1):
    """tid -> ms on a CPU within [t0, t1], from sched_switch."""
    out = {}
    running = {}  # cpu -> (tid, since)
    for e in events:
        if e.name != "sched:sched_switch":
            continue
        m = SWITCH.search(e.rest)
        if not m:
            continue
        prev, nxt = int(m.group(1)), int(m.group(3))
        t = e.t
        if t > t1:
            break
        if e.cpu in running:
            tid, since = running[e.cpu]
            a, b = max(since, t0), min(t, t1)
            if tid == prev and b > a and tid != 0:
                out[tid] = out.get(tid, 0.0) + (b - a)
        running[e.cpu] = (nxt, t)
    for cpu, (tid, since) in running.items():
        a = max(since, t0)
        if tid != 0 and t1 > a:
            out[tid] = out.get(tid, 0.0) + (t1 - a)
    return out


def analyse(events, coord, agent_pids, bin_dir):
    prefix = "filename=" + bin_dir.rstrip("/") + "/"
    parent, tgid, comm = {}, {}, {}
    for e in events:
        tgid[e.tid] = e.pid
        comm.setdefault(e.pid, e.comm)
        if e.name == "sched:sched_process_fork":
            parent[int(re.search(r"child_pid=(\d+)", e.rest).group(1))] = e.pid
    ctl_execs = [(e.t, e.pid) for e in events if e.name == "sched:sched_process_exec"
                 and (prefix + "trainletctl ") in e.rest + " "]
    step_pids = {e.pid for e in events if e.name == "sched:sched_process_exec"
                 and (prefix + "trainlet-step ") in e.rest + " "}
    floor_marks = [(e.t, parent.get(e.pid)) for e in events
                   if e.name == "sched:sched_process_exec" and ("filename=" + FLOOR_MARK) in e.rest]
    agent_of_step = {s: parent.get(s) for s in step_pids}
    results = []
    for k in range(0, len(ctl_execs), 2):
        t0, cli = ctl_execs[k]
        t_end = ctl_execs[k + 1][0] if k + 1 < len(ctl_execs) else float("inf")
        g = {"CLI exec": t0}
        per = {a: {} for a in agent_pids}  # agent -> milestone -> t
        step_agent = {}
        enter = {}
        seen_apply = False
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
                        g.setdefault("CLI connect()", e.t)
                    if e.nr == SENDTO and e.ret > 280 and "_ready" in g:
                        g.setdefault("CLI sent apply", e.t)
                    if e.nr == RECVFROM and e.ret > 0 and "CLI connect()" in g and e.ret < 100:
                        g.setdefault("_ready", e.t)
                    if e.nr == RECVFROM and e.ret > 0 and "coord Complete synced" in g:
                        g.setdefault("CLI recv answer", e.t)
                elif e.pid == coord:
                    if e.nr == RECVFROM and e.ret > 280 and "CLI sent apply" in g:
                        g.setdefault("coord recv apply", e.t)
                    if e.nr == FDATASYNC and s is not None:
                        if "coord recv apply" in g and "coord apply synced" not in g:
                            g["coord apply synced"] = e.t
                        if "coord recv last exit" in g:
                            g.setdefault("coord Complete synced", e.t)
                    if e.nr == SENDTO and e.ret > 1000 and "coord apply synced" in g:
                        g.setdefault("coord first plan sent", e.t)
                        g["coord last plan sent"] = e.t
                    if e.nr == RECVFROM and e.ret > 0 and "_all_sent" in g:
                        g.setdefault("coord recv last exit", e.t)
                elif e.pid in per:
                    m = per[e.pid]
                    if e.nr == RECVFROM and e.ret > 1000 and "coord apply synced" in g:
                        m.setdefault("agent recv plan", e.t)
                    if e.nr == SENDTO and e.tid == e.pid and "agent recv plan" in m:
                        m.setdefault("agent handed over", e.t)
                    if e.nr == SENDTO and e.ret > 0 and "step wrote last exit" in m:
                        m.setdefault("agent sent last exit", e.t)
                        if all("agent sent last exit" in x for x in per.values()):
                            g.setdefault("_all_sent", e.t)
                elif e.pid in step_pids:
                    a = agent_of_step.get(e.pid)
                    m = per.get(a)
                    if m is None:
                        continue
                    if e.nr == READ and s is not None and s.args[0] == 1 and e.ret == 1 \
                            and "agent handed over" in m:
                        m["step read its dir"] = e.t
                        step_agent[e.pid] = a
                    if step_agent.get(e.pid) == a and e.nr == WRITE and e.ret > 0 and \
                            "last rank exit" in m and m["last rank exit"] < e.t and \
                            "step wrote last exit" not in m:
                        m["step wrote last exit"] = e.t
                continue
            if e.name == "sched:sched_process_fork":
                child = int(re.search(r"child_pid=(\d+)", e.rest).group(1))
                if e.pid in per and e.tid == e.pid and "agent recv plan" in per[e.pid] \
                        and child in step_pids and "agent fork step" not in per[e.pid]:
                    per[e.pid]["agent fork step"] = e.t
                    step_agent[child] = e.pid
            elif e.name == "sched:sched_process_exec":
                a = step_agent.get(parent.get(e.pid))
                if e.pid in step_agent:
                    per[step_agent[e.pid]].setdefault("step exec", e.t)
                elif a is not None:
                    per[a].setdefault("first rank exec", e.t)
                    per[a]["last rank exec"] = e.t
            elif e.name == "sched:sched_process_exit":
                a = step_agent.get(parent.get(e.pid))
                if a is not None and e.tid == e.pid and "first rank exec" in per[a]:
                    per[a]["last rank exit"] = e.t
                if e.pid == cli and e.tid == cli:
                    g["CLI exit"] = e.t
        if "CLI exit" not in g:
            continue
        # CPU per part over the launch.
        ranks = {p for p in parent if parent[p] in step_agent}
        cpu = {}
        for tid, ms in run_time(events, t0, g["CLI exit"]).items():
            pid = tgid.get(tid, tid)
            if pid == cli:
                part = "CLI"
            elif pid == coord:
                part = "coordinator" + (" (ZMQ I/O)" if tid != pid else "")
            elif pid in agent_pids:
                part = "agents" + (" (other threads)" if tid != pid else "")
            elif pid in step_pids:
                part = "steps"
            elif pid in ranks:
                part = "ranks"
            else:
                part = "others (not this launch)"
            cpu[part] = cpu.get(part, 0.0) + ms
        results.append((g, per, cpu))
    floors = []
    for t, spawner in floor_marks:
        kids = [p for p, par in parent.items() if par == spawner]
        exits = [e.t for e in events if e.name == "sched:sched_process_exit" and e.pid in kids
                 and e.tid == e.pid]
        if not exits:
            continue
        t1 = max(exits)
        c = {}
        for tid, ms in run_time(events, t, t1).items():
            pid = tgid.get(tid, tid)
            part = "floor spawner" if pid == spawner else (
                "floor ranks" if pid in kids else "others (not this launch)")
            c[part] = c.get(part, 0.0) + ms
        floors.append((t1 - t, c))
    return results, floors


def report(results, floors, walls):
    med = statistics.median
    print(f"{len(results)} launches" + (f"; apply --wait as timed: median {med(walls):.1f} ms"
                                        if walls else ""))
    rows = {}
    for g, per, cpu in results:
        t0 = g["CLI exec"]
        for k, v in g.items():
            if not k.startswith("_"):
                rows.setdefault(k, []).append(v - t0)
        names = set()
        for m in per.values():
            names |= set(m)
        for k in names:
            ts = [m[k] for m in per.values() if k in m]
            rows.setdefault(f"{k}: first agent", []).append(min(ts) - t0)
            rows.setdefault(f"{k}: last agent", []).append(max(ts) - t0)
    print("\n| milestone | at ms (median) | min | max |\n| --- | ---: | ---: | ---: |")
    for k in sorted(rows, key=lambda k: med(rows[k])):
        if len(rows[k]) >= max(2, len(results) // 2):
            print(f"| {k} | {med(rows[k]):.1f} | {min(rows[k]):.1f} | {max(rows[k]):.1f} |")
    parts = {}
    for _, _, cpu in results:
        for k in set(parts) | set(cpu):
            parts.setdefault(k, [])
        for k in parts:
            parts[k].append(cpu.get(k, 0.0))
    print("\n| CPU per launch (ms, median) | trainlet | floor |\n| --- | ---: | ---: |")
    fparts = {}
    for _, c in floors:
        for k in set(fparts) | set(c):
            fparts.setdefault(k, [])
        for k in fparts:
            fparts[k].append(c.get(k, 0.0))
    for k in sorted(set(parts) | set(fparts)):
        a = f"{med(parts[k]):.1f}" if k in parts else "-"
        b = f"{med(fparts[k]):.1f}" if k in fparts else "-"
        print(f"| {k} | {a} | {b} |")
    ours = [sum(v for k, v in cpu.items() if not k.startswith("others")) for _, _, cpu in results]
    fours = [sum(v for k, v in c.items() if not k.startswith("others")) for _, c in floors]
    print(f"| **all of the launch's own** | **{med(ours):.1f}** | "
          f"**{med(fours):.1f}** |" if fours else "")
    if floors:
        print(f"\nfloor wall (first spawn to last exit, python posix_spawn loop): median "
              f"{med([w for w, _ in floors]):.1f} ms")
    whole = [g["CLI exit"] - g["CLI exec"] for g, _, _ in results]
    print(f"CLI exec -> CLI exit: median {med(whole):.1f} ms")


def main():
    args = list(sys.argv[1:])
    keep = None
    if "--keep" in args:
        i = args.index("--keep")
        keep = args[i + 1]
        del args[i:i + 2]
    bin_dir = args[0]
    launches = int(args[1]) if len(args) > 1 else 6
    ranks = int(args[2]) if len(args) > 2 else 256
    agents = int(args[3]) if len(args) > 3 else 8
    script = keep or tempfile.mktemp(prefix="fanout-", suffix=".txt")
    walls, coord, agent_pids = record(bin_dir, launches, ranks, agents, script)
    events = parse(script)
    results, floors = analyse(events, coord, agent_pids, bin_dir)
    report(results, floors, walls)
    if not keep:
        os.unlink(script)


if __name__ == "__main__":
    main()
