#!/usr/bin/python3
"""bench/progress: what Kubeflow's progress protocol costs a trainlet cluster.

A local cluster of AGENTS agents runs one job of RANKS ranks (RANKS/AGENTS per node) per client
in --clients, one after the other; every rank posts trainerStatus to its own agent's HTTPS
endpoint every INTERVAL seconds (bench/progress/poster.py): `sdk` through
trainlet.update_trainjob_status, one kept-alive connection per rank; `fresh` with a new TLS
connection per post, as curl in a loop would. The posts/s the posters really reached is printed
(Python posters on a small machine fall short of RANKS/INTERVAL), and the agent's CPU per post.
The same run measures the same daemons idle first, so each row reads against its own baseline:

  - CPU of each agent and of the coordinator (the scheduler's run time of all their threads,
    /proc/PID/task/*/schedstat, in % of one core), idle and under the posts;
  - each agent's RSS (VmRSS), idle and the highest sampled under the posts;
  - latency from a change of the posted percentage to `trainletctl get trainjobs -o json`
    showing it (median and max of SAMPLES changes; includes up to INTERVAL for the ranks to
    read the new value, and the agent's 500 ms batching).

Targets (issue 15): under 2% of one core per agent, visible in under 1 s, at most 1 MB of RSS
added to an idle agent (see bench/README.md for where that stands).

A/B in one run: --agent-bins A,B restarts node-1 on agent binary A and node-2 on B (same
flags, env and state dir) before the jobs, so two agents compare under the same posters, load
and moment; the rows then name each agent's binary. Swap A and B between runs to cancel any
difference between the nodes.

usage: bench/progress/run.py [--bin BUILD/bin] [--agents 2] [--ranks 64] [--interval 0.1]
                             [--duration 30] [--window 15] [--samples 10] [--clients sdk,fresh]
                             [--agent-bins A,B] [--idle-settle 3]
Every process it starts is stopped by `trainletctl local down` (pids recorded by `local up`,
rewritten for a restarted agent)."""
import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))


def cpu_ns(pid):
    """CPU time the process has run, in ns, summed over its threads (/proc/PID/task/*/schedstat:
    the scheduler's own count, not utime + stime's 10 ms ticks, which at 2-5% of a core over a
    12 s window are a quantum of about 0.1% each)."""
    total = 0
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/schedstat" % (pid, tid)) as f:
                total += int(f.read().split()[0])
        except OSError:
            pass  # a thread that ended meanwhile
    return total


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def posts_answered(address):
    """The agent's count of progress posts it answered 200 (its /metrics), or None."""
    try:
        with urllib.request.urlopen("http://%s/metrics" % address, timeout=5) as r:
            text = r.read().decode()
    except OSError:
        return None
    m = re.search(r'^trainlet_agent_progress_posts_total\{code="200"\} (\S+)$', text, re.M)
    return float(m.group(1)) if m else 0.0


def cpu_percent(pids, seconds, on_second=None):
    before = {p: cpu_ns(p) for p in pids}
    for _ in range(int(seconds)):
        time.sleep(1)
        if on_second:
            on_second()
    return {p: 100.0 * (cpu_ns(p) - before[p]) / 1e9 / seconds for p in pids}


class Cluster:
    def __init__(self, bin_dir, agents, slots):
        self.ctl = os.path.join(bin_dir, "trainletctl")
        self.dir = tempfile.mkdtemp(prefix="trainlet-progress-bench-")
        self.env = dict(os.environ, TRAINLET_HOME=self.dir)
        subprocess.run([self.ctl, "local", "up", "--agents", str(agents), "--slots", str(slots),
                        "--dir", self.dir], check=True, env=self.env, stdout=subprocess.DEVNULL)
        self.coordinator = self.pid("coordinator")
        self.agents = [self.pid("node-%d" % (i + 1)) for i in range(agents)]
        self.metrics = [self.metrics_address("node-%d" % (i + 1)) for i in range(agents)]

    def pid(self, name):
        with open(os.path.join(self.dir, "pids", name + ".pid")) as f:
            return int(f.read().split()[0])

    def metrics_address(self, name):
        with open(os.path.join(self.dir, "logs", name + ".log")) as f:
            found = re.findall(r"serving /metrics, /healthz and /readyz on http://(\S+)", f.read())
        return found[-1] if found else None  # the last: a restarted agent appends to the log

    def restart_agent(self, index, binary):
        """Restarts node-(index+1) on `binary`, with the same flags, env and state dir, and
        records its pid as `local up` does (pid and start time), so `local down` stops it."""
        name = "node-%d" % (index + 1)
        pid = self.agents[index]
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            argv = [a.decode() for a in f.read().split(b"\0") if a]
        with open("/proc/%d/environ" % pid, "rb") as f:
            env = dict(e.decode().split("=", 1) for e in f.read().split(b"\0") if b"=" in e)
        os.kill(pid, signal.SIGTERM)
        wait_for(lambda: not os.path.exists("/proc/%d" % pid) or
                 open("/proc/%d/stat" % pid).read().split(")")[1].split()[0] == "Z", 15,
                 name + " stopping")
        log = open(os.path.join(self.dir, "logs", name + ".log"), "ab")
        marker = len(open(log.name, "rb").read())
        child = subprocess.Popen([binary] + argv[1:], env=env, stdin=subprocess.DEVNULL,
                                 stdout=log, stderr=log, start_new_session=True)
        with open("/proc/%d/stat" % child.pid) as f:
            start = f.read().split(")")[1].split()[19]  # field 22: start time, in clock ticks
        with open(os.path.join(self.dir, "pids", name + ".pid"), "w") as f:
            f.write("%d %s\n" % (child.pid, start))
        self.agents[index] = child.pid
        wait_for(lambda: b"serving /metrics" in open(log.name, "rb").read()[marker:], 15,
                 name + " serving again")
        self.metrics[index] = self.metrics_address(name)

    def ctl_json(self, *args):
        out = subprocess.run([self.ctl, *args, "-o", "json"], check=True, env=self.env,
                             capture_output=True, text=True).stdout
        return json.loads(out)

    def job(self, name):
        return self.ctl_json("get", "trainjobs", name)["jobs"][0]

    def down(self):
        subprocess.run([self.ctl, "local", "down", "--dir", self.dir], env=self.env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def job_document(name, agents, ranks, interval, duration, pct_file, client):
    command = ["/usr/bin/python3", os.path.join(HERE, "poster.py"), str(interval), str(duration),
               pct_file, client]
    return json.dumps({"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
                       "metadata": {"name": name},
                       "spec": {"runtimeRef": {"name": "plain"},
                                "trainer": {"numNodes": agents,
                                            "numProcPerNode": ranks // agents,
                                            "command": command}}})


def wait_for(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    sys.exit("progress bench: %s did not happen within %d s" % (what, timeout))


def measure_latency(cluster, name, pct_file, samples):
    latencies = []
    for i in range(samples):
        pct = 10 + i
        with open(pct_file + ".tmp", "w") as f:
            f.write(str(pct))
        os.rename(pct_file + ".tmp", pct_file)
        start = time.monotonic()
        shown = lambda: cluster.job(name).get("trainerStatus", {}).get("progressPercentage") == pct
        wait_for(shown, 10, "percentage %d showing" % pct)
        latencies.append(time.monotonic() - start)
    return latencies


def run_job(cluster, a, client):
    """One job whose ranks post with `client` (poster.py); its CPU, RSS, latency and phase."""
    name = "progress-" + client
    pct_file = os.path.join(cluster.dir, "pct-" + client)
    with open(pct_file, "w") as f:
        f.write("1")
    doc = os.path.join(cluster.dir, name + ".json")
    with open(doc, "w") as f:
        f.write(job_document(name, a.agents, a.ranks, a.interval, a.duration, pct_file, client))
    subprocess.run([cluster.ctl, "apply", "-f", doc], check=True, env=cluster.env,
                   stdout=subprocess.DEVNULL)
    wait_for(lambda: cluster.job(name).get("trainerStatus", {}).get(
        "progressPercentage") == 1, 30, "the first post showing")
    time.sleep(2)  # every rank posting
    daemons = cluster.agents + [cluster.coordinator]
    load_rss = {p: rss_kb(p) for p in cluster.agents}

    def sample_rss():
        for p in cluster.agents:
            load_rss[p] = max(load_rss[p], rss_kb(p))
    window = min(a.window, a.duration - 8)
    posts_before = [posts_answered(m) for m in cluster.metrics]
    load_cpu = cpu_percent(daemons, window, sample_rss)
    posts_after = [posts_answered(m) for m in cluster.metrics]
    # Posts each agent answered in the CPU window, per second: from its own counter, so the CPU
    # per post divides by the posts of the same seconds (the posters' own rate varies with load).
    window_rate = [(b2 - b1) / window if b1 is not None and b2 is not None else None
                   for b1, b2 in zip(posts_before, posts_after)]
    latencies = measure_latency(cluster, name, pct_file, a.samples)

    def ended():
        phase = str(cluster.job(name).get("jobPhase", "")).lower()
        return "succeeded" in phase or "failed" in phase
    wait_for(ended, a.duration + 30, "the job ending")
    logs = subprocess.run([cluster.ctl, "logs", name], env=cluster.env, capture_output=True,
                          text=True).stdout
    posted = [l for l in logs.splitlines() if "posted" in l]
    return {"cpu": load_cpu, "rss": load_rss, "latencies": latencies,
            "phase": cluster.job(name).get("jobPhase"), "posted": posted,
            "window_rate": window_rate}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=os.environ.get("TRAINLET_BIN",
                                                     os.path.join(HERE, "..", "..", "build", "bin")))
    ap.add_argument("--agents", type=int, default=2)
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--interval", type=float, default=0.1)
    ap.add_argument("--duration", type=float, default=30)
    ap.add_argument("--window", type=float, default=15, help="seconds of CPU measurement")
    ap.add_argument("--samples", type=int, default=10, help="latency samples")
    ap.add_argument("--clients", default="sdk,fresh",
                    help="poster.py clients, one job each in turn: sdk (kept-alive), fresh")
    ap.add_argument("--agent-bins", default="",
                    help="A,B,...: restart node-1 on agent binary A, node-2 on B, ... (A/B)")
    ap.add_argument("--idle-settle", type=float, default=3,
                    help="seconds after start-up before the idle RSS and CPU are read")
    a = ap.parse_args()
    a.clients = a.clients.split(",")
    if a.ranks % a.agents:
        sys.exit("--ranks must be a multiple of --agents")
    agent_bins = [os.path.abspath(b) for b in a.agent_bins.split(",") if b]
    if len(agent_bins) > a.agents:
        sys.exit("--agent-bins names more binaries than --agents")

    cluster = Cluster(a.bin, a.agents, a.ranks // a.agents)
    try:
        for i, binary in enumerate(agent_bins):
            cluster.restart_agent(i, binary)
        time.sleep(a.idle_settle)  # start-up work done
        daemons = cluster.agents + [cluster.coordinator]
        idle_rss = {p: rss_kb(p) for p in cluster.agents}
        idle_cpu = cpu_percent(daemons, a.window)

        results = {c: run_job(cluster, a, c) for c in a.clients}
    finally:
        cluster.down()

    posts = a.ranks / a.interval
    for i, binary in enumerate(agent_bins):
        print("node-%d runs %s" % (i + 1, binary))
    print("bench/progress: %d ranks on %d agents, each posting every %g s (%d posts/s in all), "
          "%g s windows" % (a.ranks, a.agents, a.interval, posts, a.window))
    for client, r in results.items():
        ok = sum(int(m.group(1)) for m in map(re.compile(r"posted \d+ ok (\d+)").search,
                                                r["posted"]) if m)
        rate = ok / a.duration / a.agents  # what the posters reached, per agent
        print("\nclient %s: job %s, %d of %d ranks' posts logged, %d answered 200: %.0f posts/s "
              "per agent (asked: %.0f)" % (client, r["phase"], len(r["posted"]), a.ranks, ok, rate,
                                          a.ranks / a.agents / a.interval))
        for i, p in enumerate(cluster.agents):
            own = r["window_rate"][i] or rate  # the agent's count in the window, else the posters'
            print("agent node-%d: %.0f us of CPU per post (%.0f posts/s in the CPU window)" % (
                i + 1, 1e4 * max(0.0, r["cpu"][p] - idle_cpu[p]) / own if own else 0, own))
        print()
        print("| process | CPU idle (% of a core) | CPU under posts | RSS idle (kB) | "
              "RSS under posts (kB) |")
        print("| --- | ---: | ---: | ---: | ---: |")
        for i, p in enumerate(cluster.agents):
            print("| agent node-%d | %.2f | %.2f | %d | %d |" % (
                i + 1, idle_cpu[p], r["cpu"][p], idle_rss[p], r["rss"][p]))
        c = cluster.coordinator
        print("| coordinator | %.2f | %.2f | - | - |" % (idle_cpu[c], r["cpu"][c]))
        lat = r["latencies"]
        print("\npost -> `get trainjobs` latency over %d changes: median %.0f ms, max %.0f ms" %
              (len(lat), 1000 * statistics.median(lat), 1000 * max(lat)))

if __name__ == "__main__":
    main()
