#!/usr/bin/python3
"""bench/progress/idle_rss.py: idle RSS of several agent binaries side by side, in one cluster.

Starts a local cluster of one agent per LABEL (with --bin's trainletctl and coordinator),
restarts node-N on that LABEL's binary (same flags, env and state dir, as run.py --agent-bins
does; "+FLAG+VALUE" after the binary appends flags, e.g. "+--progress-port+-1"), then samples
every agent as bench/launch does (3 s settle, 10 s idle, then VmRSS, RssAnon, RssFile and
Threads from /proc/PID/status and Pss from smaps_rollup). The order of the agents rotates every
run; prints each sample and the medians. Give each label its own binary file (a copy is enough):
agents that run the same file share its pages, which lowers their PSS (not their RSS).
Each binary needs its trainlet-step beside it.

usage: bench/progress/idle_rss.py [--bin BUILD/bin] [--runs 6] LABEL=BINARY[+FLAG+VALUE...] ...
Every process it starts is stopped by `trainletctl local down`."""
import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run as bench  # noqa: E402  (bench/progress/run.py: Cluster)


def sample(pid):
    s = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            key = line.split(":")[0]
            if key in ("VmRSS", "RssAnon", "RssFile", "Threads"):
                s[key] = int(line.split()[1])
    with open("/proc/%d/smaps_rollup" % pid) as f:
        for line in f:
            if line.startswith("Pss:"):
                s["Pss"] = int(line.split()[1])
    return s


def restart(cluster, index, binary, extra):
    """cluster.restart_agent, with `extra` flags appended to the agent's own."""
    popen = bench.subprocess.Popen
    bench.subprocess.Popen = lambda argv, **kw: popen(argv + extra, **kw)
    try:
        cluster.restart_agent(index, binary)
    finally:
        bench.subprocess.Popen = popen


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=os.environ.get("TRAINLET_BIN", os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "..", "build", "bin")))
    ap.add_argument("--runs", type=int, default=6)
    ap.add_argument("agents", nargs="+", metavar="LABEL=BINARY[+FLAG+VALUE...]")
    a = ap.parse_args()
    specs = []
    for arg in a.agents:
        label, rest = arg.split("=", 1)
        parts = rest.split("+")
        specs.append((label, os.path.abspath(parts[0]), parts[1:]))
    results = {label: [] for label, _, _ in specs}
    for r in range(a.runs):
        order = specs[r % len(specs):] + specs[:r % len(specs)]
        cluster = bench.Cluster(a.bin, len(order), 1)
        try:
            for i, (_, binary, extra) in enumerate(order):
                restart(cluster, i, binary, extra)
            time.sleep(3 + 10)
            load = " ".join(open("/proc/loadavg").read().split()[:3])
            for i, (label, _, _) in enumerate(order):
                s = sample(cluster.agents[i])
                results[label].append(s)
                print("run %d node-%d %s: %s (load %s)" % (r + 1, i + 1, label, s, load),
                      flush=True)
        finally:
            cluster.down()
    print("\n| agent (median of %d) | VmRSS kB | RssAnon kB | RssFile kB | PSS kB | threads |"
          % a.runs)
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for label, _, _ in specs:
        med = lambda k: statistics.median(x[k] for x in results[label])  # noqa: E731
        print("| %s | %d | %d | %d | %d | %d |" % (label, med("VmRSS"), med("RssAnon"),
                                                 med("RssFile"), med("Pss"), med("Threads")))


if __name__ == "__main__":
    main()
