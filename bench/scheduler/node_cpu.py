#!/usr/bin/env python3
"""bench/scheduler/node_cpu.py: what 200 tiny jobs cost each process, for builds side by side.

For each build given (a bin/ dir), a 2-agent `trainletctl local up` cluster is started, all at
once; then, rep by rep and build by build in turn, one file of N one-rank `true` jobs is applied,
waited on until every job is Complete, then deleted. Around each run and each delete it reads
the CPU (user + system) of the whole machine (/proc/stat), of the coordinator and of each agent
(/proc/PID/stat: its own threads, and the children it reaped: steps and ranks), and prints the
medians per build. CPU rather than wall time: on a 2-CPU host the wall clock of such a run moves
by tens of percent from one run to the next, what each process spent much less.

  bench/scheduler/node_cpu.py OLD/bin,NEW/bin --reps 7

The clusters are taken down (by pid, `local down`) and their dirs removed at the end, or on
Ctrl-C.
"""

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run as R  # noqa: E402  (this directory's run.py: the cluster and job helpers)

def machine_busy_ms():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (sum(v) - v[3] - v[4]) * 1000 // os.sysconf("SC_CLK_TCK")  # all but idle and iowait


def process_ms(pid):
    """(own threads, reaped children) CPU of `pid`, in ms."""
    return tuple(round(t * 1000) for t in R.cpu_times(pid))


def pid_of(cluster, name):
    with open(os.path.join(cluster.dir, "pids", name + ".pid")) as f:
        return int(f.read().split()[0])


ROWS = ("run: all CPUs busy", "run: coordinator", "run: agents' own threads",
        "run: steps and ranks (reaped by the agents)", "delete: all CPUs busy",
        "delete: agents' own threads")


def one_rep(cluster, n):
    cluster.round += 1
    names = ["c%d-%d" % (cluster.round, i) for i in range(n)]
    path = os.path.join(cluster.dir, "round-%d.yaml" % cluster.round)
    R.write_jobs(path, names, ["true"], False)
    pids = {k: pid_of(cluster, k) for k in ("coordinator", "node-1", "node-2")}
    agents = ("node-1", "node-2")
    b0, c0 = machine_busy_ms(), {k: process_ms(p) for k, p in pids.items()}
    R.run([cluster.ctl, "apply", "-f", path], env=cluster.env)
    cluster.wait_complete(names, 300)
    time.sleep(1)
    b1, c1 = machine_busy_ms(), {k: process_ms(p) for k, p in pids.items()}
    cluster.delete(names)
    time.sleep(2)
    b2, c2 = machine_busy_ms(), {k: process_ms(p) for k, p in pids.items()}
    return (b1 - b0, c1["coordinator"][0] - c0["coordinator"][0],
            sum(c1[a][0] - c0[a][0] for a in agents), sum(c1[a][1] - c0[a][1] for a in agents),
            b2 - b1, sum(c2[a][0] - c1[a][0] for a in agents))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("bins", help="comma-separated bin/ dirs of the builds to compare")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--jobs", type=int, default=200, help="jobs per run")
    a = ap.parse_args()
    bins = a.bins.split(",")
    clusters = []
    try:
        for b in bins:
            clusters.append(R.Trainlet(b, 2, False))
        time.sleep(3)  # start-up work done
        results = {b: [] for b in bins}
        for rep in range(a.reps):
            for b, c in zip(bins, clusters):
                results[b].append(one_rep(c, a.jobs))
            print("rep %d/%d done" % (rep + 1, a.reps), file=sys.stderr)
    finally:
        for c in clusters:
            c.down()
    print("| ms per %d jobs, medians of %d reps | %s |" % (a.jobs, a.reps, " | ".join(bins)))
    print("| --- |%s" % (" ---: |" * len(bins)))
    for i, row in enumerate(ROWS):
        cells = ["%.0f (%s)" % (statistics.median(r[i] for r in results[b]),
                                " ".join(str(r[i]) for r in results[b])) for b in bins]
        print("| %s | %s |" % (row, " | ".join(cells)))


if __name__ == "__main__":
    main()
