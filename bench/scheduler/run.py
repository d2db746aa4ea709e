#!/usr/bin/python3
"""bench/scheduler: how many jobs trainlet takes in and finishes, beside Slurm, and how long one
scheduling pass takes with a deep queue.

Three measurements, each repeated --reps times with trainlet and Slurm interleaved (trainlet,
Slurm, trainlet, ...) so noise on the shared machine falls on both:

  submit-each  N one-rank jobs (`true`), one `trainletctl apply -f job.yaml` process per job, one
               after the other; against N `sbatch --wrap true`. Submissions per second, then
               completed tiny jobs per second: N over the time from the first submission until
               the last job is Complete (trainlet) or gone from `squeue` (Slurm).
  submit-file  the same N jobs in one file and one `trainletctl apply`; against one
               `sbatch --array=1-N --wrap true` (Slurm's many-jobs-in-one-submission). Same two
               rates.
  pass         a coordinator with --sim-agents simulated agents (bench/failover's
               trainlet-sim-agents: real CURVE clients, one slot each, no workers) and
               --pending jobs waiting beyond the ones placed on every slot. The time of one
               scheduling pass is read from the coordinator's own histogram
               (trainlet_coordinator_schedule_pass_seconds) over a --window of ticks: the median
               (interpolated in its bucket) and the mean.

With --queues, the trainlet cluster first gets one ResourceFlavor, a ClusterQueue whose quota
holds every job, and a LocalQueue, and every job is labelled kueue.x-k8s.io/queue-name (issue
14: no regression with queues on). The pass is then measured three times in the same run:
queues off; queues on with that roomy quota (the jobs wait for room, not quota); and queues on
with quotas that bind: two ClusterQueues in one cohort (60% and 40% of the simulated slots' cpu,
so together they hold exactly the running jobs) fed by four LocalQueues, the jobs spread over
them round robin, so every pending job waits for quota and every admission pass evaluates all
of them. An admission pass runs only when something changed, else once a second, so besides the
median the slowest passes are reported: how many took over 20 ms, and the bucket of the slowest;
and the coordinator's CPU time over the window (ms per second), which a loaded machine does not
inflate as it does wall-clock pass times.

--compare-queues runs only the submissions, on two clusters up side by side, one without queues
and one with --queues' objects, their trials alternating (off, on; on, off; ...), and prints
the issue's figures as times (N applies one by one, all Complete after the first apply, one
file) with the ratio on / off: the no-regression check in one run on a shared machine.

Slurm: `scripts/setup-slurm-localhost` (one node, this host). Without sbatch/sinfo the Slurm
columns say why they are empty. Every trainlet process is stopped by PID (`trainletctl local
down`, and the coordinator and sim-agents this script starts); Slurm jobs it submitted are
cancelled by job id.

usage: bench/scheduler/run.py [--bin BUILD/bin] [--jobs 200] [--reps 3] [--agents 2]
                              [--sim-agents 1000] [--pending 10000] [--window 10]
                              [--queues] [--no-slurm] [--no-pass] [--compare-queues]"""
import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.abspath(os.path.join(HERE, "..", ".."))
MAX_DOCS_PER_APPLY = 2000  # coordinator/apply_limits.h kMaxApplyDocuments

QUEUE_OBJECTS = """\
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata:
  name: bench-flavor
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata:
  name: bench-cq
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: ["cpu", "memory"]
    flavors:
    - name: bench-flavor
      resources:
      - name: cpu
        nominalQuota: 100000
      - name: memory
        nominalQuota: 100000Gi
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata:
  namespace: default
  name: bench-q
spec:
  clusterQueue: bench-cq
"""


def bound_queue_objects(slots):
    """Two ClusterQueues in a cohort whose cpu quota holds `slots` jobs of 100m, four
    LocalQueues (bench-a1, bench-a2 -> bench-a; bench-b1, bench-b2 -> bench-b)."""
    docs = ["apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\n"
            "metadata: {name: bench-flavor}"]
    a = slots * 100 * 6 // 10
    for cq, millis in (("bench-a", a), ("bench-b", slots * 100 - a)):
        docs.append(
            "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: %s}\n"
            "spec:\n  cohort: bench\n  namespaceSelector: {}\n  resourceGroups:\n"
            "  - coveredResources: [cpu]\n    flavors:\n    - name: bench-flavor\n"
            "      resources:\n      - {name: cpu, nominalQuota: %dm}" % (cq, millis))
        for lq in (cq + "1", cq + "2"):
            docs.append("apiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\n"
                        "metadata: {namespace: default, name: %s}\nspec: {clusterQueue: %s}"
                        % (lq, cq))
    return "\n---\n".join(docs) + "\n"


BOUND_LOCAL_QUEUES = ["bench-a1", "bench-b1", "bench-a2", "bench-b2"]


def job_doc(name, command, queue):
    """queue: False (no label), True (bench-q) or a LocalQueue's name."""
    lq = "bench-q" if queue is True else queue
    labels = {"kueue.x-k8s.io/queue-name": lq} if lq else {}
    return json.dumps({
        "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
        "metadata": {"name": name, "labels": labels},
        "spec": {"runtimeRef": {"name": "plain"},
                 "trainer": {"numNodes": 1, "numProcPerNode": 1, "command": command,
                             "resourcesPerNode": {"requests": {"cpu": "100m"}}}}})


def write_jobs(path, names, command, queue, first=0):
    """queue: as job_doc's, or "bound": job i (counting from `first`) in
    BOUND_LOCAL_QUEUES[i % 4]."""
    def q(i):
        return BOUND_LOCAL_QUEUES[(first + i) % 4] if queue == "bound" else queue
    with open(path, "w") as f:
        f.write("\n---\n".join(job_doc(n, command, q(i)) for i, n in enumerate(names)))


def run(cmd, env=None, check=True):
    return subprocess.run(cmd, env=env, check=check, capture_output=True, text=True)


class Trainlet:
    """A `trainletctl local up` cluster."""

    def __init__(self, bin_dir, agents, queues):
        self.ctl = os.path.join(bin_dir, "trainletctl")
        self.dir = tempfile.mkdtemp(prefix="trainlet-sched-bench-")
        self.env = dict(os.environ, TRAINLET_HOME=self.dir)
        self.queues = queues
        self.round = 0
        self._metrics = None  # the coordinator's /metrics URL, once read from its log
        run([self.ctl, "local", "up", "--agents", str(agents), "--slots", "8", "--dir", self.dir],
            env=self.env)
        if queues:
            path = os.path.join(self.dir, "queues.yaml")
            with open(path, "w") as f:
                f.write(QUEUE_OBJECTS)
            run([self.ctl, "apply", "-f", path], env=self.env)

    def down(self):
        subprocess.run([self.ctl, "local", "down", "--dir", self.dir], env=self.env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        shutil.rmtree(self.dir, ignore_errors=True)  # its state, logs and 200-job files

    def phases(self):
        """Phase of every job, by name (trainletctl fetches every page)."""
        args = [self.ctl, "get", "trainjobs", "-o", "json", "--limit", "0"]
        page = json.loads(run(args, env=self.env).stdout)
        return {j["name"]: j.get("jobPhase", "") for j in page.get("jobs", [])}

    def metrics_url(self):
        """The coordinator's /metrics, from the line its log starts with."""
        if self._metrics is None:
            with open(os.path.join(self.dir, "logs", "coordinator.log")) as f:
                m = re.search(r"serving /metrics, /healthz and /readyz on (http://\S+)", f.read())
            if not m:
                sys.exit("scheduler bench: the coordinator's log names no /metrics address")
            self._metrics = m.group(1) + "/metrics"
        return self._metrics

    def jobs_by_phase(self):
        """trainlet_coordinator_jobs by phase: one HTTP GET, collected by the coordinator."""
        text = urllib.request.urlopen(self.metrics_url(), timeout=10).read().decode()
        return {m.group(1): int(float(m.group(2))) for m in
                re.finditer(r'^trainlet_coordinator_jobs\{phase="([^"]+)"\} (\S+)$', text, re.M)}

    def wait_complete(self, names, timeout):
        """When every job of `names` is Complete. Polled through the coordinator's job gauge
        (the cluster holds no other job: `delete` waits until the last round's are gone), not
        `get trainjobs -o json`, which took 36-39 ms of CPU per call at 200 jobs: polled every
        20 ms, about one of the two CPUs the cluster under test runs on. Checked by name once at
        the end."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            by_phase = self.jobs_by_phase()
            if by_phase.get("Failed", 0):
                break  # named below
            if by_phase.get("Succeeded", 0) >= len(names):
                done = time.monotonic()
                break
            time.sleep(0.02)
        else:
            sys.exit("scheduler bench: trainlet jobs not Complete within %d s" % timeout)
        ph = self.phases()
        failed = [n for n in names if "FAILED" in ph.get(n, "").upper()]
        if failed:
            sys.exit("scheduler bench: %d jobs failed, e.g. %s" % (len(failed), failed[0]))
        missing = [n for n in names if "SUCCEEDED" not in ph.get(n, "").upper()]
        if missing:
            sys.exit("scheduler bench: %d jobs not Complete, e.g. %s: %s" %
                     (len(missing), missing[0], ph.get(missing[0], "not found")))
        return done

    def delete(self, names):
        for n in names:
            run([self.ctl, "delete", "trainjob", n], env=self.env, check=False)
        deadline = time.monotonic() + 120
        while sum(self.jobs_by_phase().values()) > 0:  # gone, so the next count is of the next jobs
            if time.monotonic() > deadline:
                sys.exit("scheduler bench: deleted jobs still there after 120 s")
            time.sleep(0.05)

    def trial(self, n, one_file):
        self.round += 1
        names = ["s%d-%d" % (self.round, i) for i in range(n)]
        files = []
        if one_file:
            path = os.path.join(self.dir, "round-%d.yaml" % self.round)
            write_jobs(path, names, ["true"], self.queues)
            files.append(path)
        else:
            for name in names:
                path = os.path.join(self.dir, name + ".yaml")
                write_jobs(path, [name], ["true"], self.queues)
                files.append(path)
        start = time.monotonic()
        for path in files:
            run([self.ctl, "apply", "-f", path], env=self.env)
        submitted = time.monotonic()
        done = self.wait_complete(names, 300)
        self.delete(names)
        return n / (submitted - start), n / (done - start)


class Slurm:
    def __init__(self):
        self.reason = None
        if not shutil.which("sbatch") or not shutil.which("sinfo"):
            self.reason = "no Slurm: sbatch not in PATH (run scripts/setup-slurm-localhost)"
            return
        info = run(["sinfo", "-h", "-o", "%t"], check=False)
        if info.returncode != 0 or not info.stdout.strip():
            self.reason = "no Slurm: sinfo finds no node (run scripts/setup-slurm-localhost)"
        self.out = tempfile.mkdtemp(prefix="trainlet-sched-bench-slurm-")
        self.ids = []

    def wait_gone(self, ids, timeout):
        want = set(ids)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            q = run(["squeue", "-h", "-o", "%F"], check=False).stdout.split()
            if not want.intersection(q):
                return time.monotonic()
            time.sleep(0.02)
        self.cancel()
        sys.exit("scheduler bench: Slurm jobs still queued after %d s" % timeout)

    def cancel(self):
        if self.ids:
            subprocess.run(["scancel"] + self.ids, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)

    def trial(self, n, one_file):
        base = ["sbatch", "--parsable", "-o", "/dev/null", "-e", "/dev/null", "-D", self.out]
        start = time.monotonic()
        ids = []
        if one_file:
            out = run(base + ["--array=1-%d" % n, "--wrap", "true"]).stdout.strip()
            ids.append(out.split(";")[0])
        else:
            for _ in range(n):
                ids.append(run(base + ["--wrap", "true"]).stdout.strip().split(";")[0])
        submitted = time.monotonic()
        self.ids = ids
        done = self.wait_gone(ids, 600)
        self.ids = []
        return n / (submitted - start), n / (done - start)


def metric_histogram(url, name):
    """(buckets [(le, cumulative count)], sum, count) of a Prometheus histogram."""
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    buckets, total, count = [], 0.0, 0
    for line in text.splitlines():
        m = re.match(r'%s_bucket\{le="([^"]+)"\} (\S+)' % name, line)
        if m:
            le = float("inf") if m.group(1) == "+Inf" else float(m.group(1))
            buckets.append((le, float(m.group(2))))
        elif line.startswith(name + "_sum "):
            total = float(line.split()[1])
        elif line.startswith(name + "_count "):
            count = int(float(line.split()[1]))
    return buckets, total, count


def histogram_median(before, after):
    """Median of the observations between two scrapes, interpolated inside its bucket."""
    diff = [(le, a - b) for (le, a), (_, b) in zip(after[0], before[0])]
    n = after[2] - before[2]
    if n <= 0:
        return None
    half, lower, prev = n / 2.0, 0.0, 0.0
    for le, cum in diff:
        if cum >= half:
            if le == float("inf"):
                return lower
            return lower + (le - lower) * (half - prev) / max(cum - prev, 1e-9)
        lower, prev = le, cum
    return lower


def histogram_over(before, after, bound):
    """(passes over `bound` seconds, upper bound of the slowest pass's bucket) between scrapes."""
    diff = [(le, a - b) for (le, a), (_, b) in zip(after[0], before[0])]
    n = after[2] - before[2]
    at_bound = max([cum for le, cum in diff if le <= bound] or [0])
    slowest = next((le for le, cum in diff if cum >= n), float("inf")) if n else None
    return int(n - at_bound), slowest


def cpu_times(pid):
    """User + system CPU time of process `pid` so far, in seconds (/proc/PID/stat): (its own
    threads', its reaped children's)."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / tick, (int(fields[13]) + int(fields[14])) / tick


def cpu_seconds(pid):
    """User + system CPU time of process `pid`'s own threads so far, in seconds."""
    return cpu_times(pid)[0]


def pass_trial(bin_dir, sim, pending, window, queues):
    """A coordinator, `sim` simulated one-slot agents, sim + pending one-rank jobs. queues: False,
    True (one roomy ClusterQueue) or "bound" (bound_queue_objects)."""
    work = tempfile.mkdtemp(prefix="trainlet-sched-pass-")
    env = dict(os.environ, TRAINLET_HOME=work)
    ctl = os.path.join(bin_dir, "trainletctl")
    keys = os.path.join(work, "keys")
    os.makedirs(keys)
    run([ctl, "keys", "create", "--role", "coordinator", "--name", "coordinator", "--dir", keys])
    run([ctl, "keys", "create", "--role", "operator", "--name", "operator", "--dir", keys,
         "--allowlist", os.path.join(keys, "operators.allow")])
    open(os.path.join(keys, "agents.allow"), "w").close()
    procs = []
    try:
        log = open(os.path.join(work, "coordinator.log"), "w")
        coord = subprocess.Popen(
            [os.path.join(bin_dir, "trainlet-coordinator"), "--state-dir",
             os.path.join(work, "coordinator"), "--agent-listen", "tcp://127.0.0.1:0",
             "--exec-listen", "tcp://127.0.0.1:0", "--operator-listen", "tcp://127.0.0.1:0",
             "--key", os.path.join(keys, "coordinator.key"),
             "--agent-allowlist", os.path.join(keys, "agents.allow"),
             "--operator-allowlist", os.path.join(keys, "operators.allow"),
             "--runtimes-dir", os.path.join(SRC, "deploy", "runtimes"),
             "--metrics-address", "127.0.0.1:0",
             # a throwaway cluster: its empty store is initialised at start
             "--empty-store", "init",
             "--endpoints-file", os.path.join(work, "endpoints.json")],
            stdout=log, stderr=subprocess.STDOUT)
        procs.append(coord)
        endpoints = os.path.join(work, "endpoints.json")
        deadline = time.monotonic() + 30
        while not (os.path.exists(endpoints) and os.path.getsize(endpoints) > 0):
            if time.monotonic() > deadline or coord.poll() is not None:
                sys.exit("scheduler bench: the coordinator did not start (%s)" % log.name)
            time.sleep(0.05)
        ep = json.load(open(endpoints))
        with open(os.path.join(work, "config.yaml"), "w") as f:
            f.write("coordinator: %s\ncoordinator_key: keys/coordinator.key.pub\n"
                    "key: keys/operator.key\n" % ep["operator_endpoint"])
        metrics = "http://%s/metrics" % ep["metrics_endpoint"]
        sim_out = open(os.path.join(work, "sim.out"), "w")
        sim_proc = subprocess.Popen(
            [os.path.join(bin_dir, "trainlet-sim-agents"), "--count", str(sim),
             "--endpoint", ep["agent_endpoint"],
             "--server-key", os.path.join(keys, "coordinator.key.pub"),
             "--allowlist", os.path.join(keys, "agents.allow")],
            stdout=sim_out, stderr=subprocess.DEVNULL)
        procs.append(sim_proc)
        deadline = time.monotonic() + 120
        while "registered %d" % sim not in open(sim_out.name).read():
            if time.monotonic() > deadline or sim_proc.poll() is not None:
                sys.exit("scheduler bench: simulated agents did not register")
            time.sleep(0.2)
        if queues:
            path = os.path.join(work, "queues.yaml")
            with open(path, "w") as f:
                f.write(bound_queue_objects(sim) if queues == "bound" else QUEUE_OBJECTS)
            run([ctl, "apply", "-f", path], env=env)
        names = ["p%d" % i for i in range(sim + pending)]
        for i in range(0, len(names), MAX_DOCS_PER_APPLY):
            path = os.path.join(work, "jobs-%d.yaml" % i)
            write_jobs(path, names[i:i + MAX_DOCS_PER_APPLY], ["sleep", "3600"], queues, i)
            run([ctl, "apply", "-f", path], env=env)
        time.sleep(2)  # placements done, the queue steady
        if os.environ.get("SCHED_BENCH_PERF"):  # profile the coordinator over the window
            subprocess.Popen(["perf", "record", "-g", "-o", os.environ["SCHED_BENCH_PERF"],
                              "-p", str(coord.pid), "--", "sleep", str(window)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        before = metric_histogram(metrics, "trainlet_coordinator_schedule_pass_seconds")
        cpu_before = cpu_seconds(coord.pid)
        time.sleep(window)
        cpu = (cpu_seconds(coord.pid) - cpu_before) / window  # of one core, over the window
        after = metric_histogram(metrics, "trainlet_coordinator_schedule_pass_seconds")
        n = after[2] - before[2]
        mean = (after[1] - before[1]) / n if n else None
        over, slowest = histogram_over(before, after, 0.02)
        return histogram_median(before, after), mean, n, over, slowest, cpu
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(20)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()


def compare_queues(a):
    """Queues off and on in one run: two clusters up side by side, their trials alternating
    (off, on; then on, off; ...), so the machine's load falls on both alike. The issue's
    figures as times: N applies one by one, all Complete after the first apply, one file.
    With --baseline-bin, a third cluster runs another build (the tree before the queues) in the
    same rotation, so "no regression" is measured against it, not against figures of another
    day or machine."""
    clusters = {"off": Trainlet(a.bin, a.agents, False), "on": Trainlet(a.bin, a.agents, True)}
    if a.baseline_bin:
        clusters["base"] = Trainlet(a.baseline_bin, a.agents, False)
    modes = list(clusters)
    rows = ("%d applies, one job each" % a.jobs, "all %d Complete, from the first apply" % a.jobs,
            "one file of %d jobs applied" % a.jobs)
    times = {m: {r: [] for r in rows} for m in clusters}
    load = [os.getloadavg()[0]]
    try:
        for rep in range(a.reps):
            for mode in modes[rep % len(modes):] + modes[:rep % len(modes)]:  # rotated
                submitted, completed = clusters[mode].trial(a.jobs, False)
                file_submitted, _ = clusters[mode].trial(a.jobs, True)
                for row, rate in zip(rows, (submitted, completed, file_submitted)):
                    times[mode][row].append(a.jobs / rate)
            load.append(os.getloadavg()[0])
            print("rep %d/%d done" % (rep + 1, a.reps), file=sys.stderr)
    finally:
        for c in clusters.values():
            c.down()
    print("bench/scheduler --compare-queues: %d reps (medians), %d agents, %d cores, %s, "
          "load average (1 min) %.1f-%.1f" %
          (a.reps, a.agents, os.cpu_count(), time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           min(load), max(load)))
    print()
    base = "base" in clusters
    if base:
        print("baseline: %s" % a.baseline_bin)
        print()
    print("| measurement |%s queues off | queues on | on / off | on / off, each rep's pair |%s" %
          (" baseline |" if base else "", " on / baseline, each rep's |" if base else ""))
    print("| --- | ---: | ---: | ---: | ---: |%s" % (" ---: | ---: |" if base else ""))
    for i, row in enumerate(rows):
        off, on = (statistics.median(times[m][row]) for m in ("off", "on"))
        pairs = sorted(n / f for f, n in zip(times["off"][row], times["on"][row]))
        fmt = (lambda v: "%.0f ms" % (v * 1000)) if i == 2 else (lambda v: "%.2f s" % v)
        line = "| %s |" % row
        if base:
            line += " %s |" % fmt(statistics.median(times["base"][row]))
        line += " %s | %s | %.2f | median %.2f (%.2f-%.2f) |" % (
            fmt(off), fmt(on), on / off, statistics.median(pairs), pairs[0], pairs[-1])
        if base:
            vs = sorted(n / b for b, n in zip(times["base"][row], times["on"][row]))
            line += " median %.2f (%.2f-%.2f) |" % (statistics.median(vs), vs[0], vs[-1])
        print(line)


def fmt_rate(values):
    return "%.0f" % statistics.median(values) if values else "-"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=os.environ.get("TRAINLET_BIN",
                                                     os.path.join(SRC, "build", "bin")))
    ap.add_argument("--jobs", type=int, default=200, help="jobs per submission trial")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--agents", type=int, default=2)
    ap.add_argument("--sim-agents", type=int, default=1000)
    ap.add_argument("--pending", type=int, default=10000)
    ap.add_argument("--window", type=float, default=10, help="seconds of passes to read")
    ap.add_argument("--queues", action="store_true", help="run trainlet's jobs through a queue")
    ap.add_argument("--no-slurm", action="store_true")
    ap.add_argument("--no-pass", action="store_true")
    ap.add_argument("--no-submit", action="store_true", help="only the scheduling pass")
    ap.add_argument("--compare-queues", action="store_true",
                    help="only the submissions, queues off and on alternating in one run")
    ap.add_argument("--baseline-bin", default="",
                    help="with --compare-queues: also run this build's binaries (queues off) in "
                         "the same rotation, e.g. the tree before the queues")
    a = ap.parse_args()
    for flag in ("jobs", "reps", "agents", "sim_agents", "pending"):
        if getattr(a, flag) < 1:
            sys.exit("--%s: must be at least 1" % flag.replace("_", "-"))
    a.bin = os.path.abspath(a.bin)
    if a.baseline_bin:
        if not a.compare_queues:
            sys.exit("--baseline-bin: only with --compare-queues")
        a.baseline_bin = os.path.abspath(a.baseline_bin)
        if not os.access(os.path.join(a.baseline_bin, "trainletctl"), os.X_OK):
            sys.exit("--baseline-bin: no trainletctl in %s" % a.baseline_bin)
    if a.compare_queues:
        compare_queues(a)
        return

    slurm = None if a.no_slurm or a.no_submit else Slurm()
    slurm_note = slurm.reason if slurm else "skipped"
    results = {k: [] for k in ("t-each", "t-file", "s-each", "s-file")}
    cluster = None if a.no_submit else Trainlet(a.bin, a.agents, a.queues)
    try:
        for rep in range(0 if a.no_submit else a.reps):
            for one_file, key in ((False, "each"), (True, "file")):
                results["t-" + key].append(cluster.trial(a.jobs, one_file))
                if slurm and not slurm.reason:
                    results["s-" + key].append(slurm.trial(a.jobs, one_file))
                print("rep %d/%d %s done" % (rep + 1, a.reps, key), file=sys.stderr)
    finally:
        if cluster:
            cluster.down()
        if slurm and not slurm.reason:
            slurm.cancel()

    passes = []  # (what, result), in the same run
    if not a.no_pass:
        modes = [("queues off", False)]
        if a.queues:
            modes += [("queues on, quota holds every job", True),
                      ("queues on, quota binds (2 ClusterQueues in a cohort, 4 LocalQueues)",
                       "bound")]
        for what, mode in modes:
            passes.append((what, pass_trial(a.bin, a.sim_agents, a.pending, a.window, mode)))
            print("pass (%s) done" % what, file=sys.stderr)

    print("bench/scheduler: %d jobs per trial, %d reps (medians), %d agents, %d cores, %s%s" %
          (a.jobs, a.reps, a.agents, os.cpu_count(), time.strftime("%Y-%m-%d %H:%M UTC",
                                                                     time.gmtime()),
           ", queues on" if a.queues else ""))
    print()
    print("| measurement | trainlet | Slurm | trainlet / Slurm |")
    print("| --- | ---: | ---: | ---: |")
    for key, what in (("each", "one submission per job"), ("file", "one file / job array")):
        for idx, rate in ((0, "submitted/s"), (1, "completed/s")):
            t = [r[idx] for r in results["t-" + key]]
            s = [r[idx] for r in results["s-" + key]]
            ratio = ("%.2f×" % (statistics.median(t) / statistics.median(s))) if t and s else "-"
            print("| %s, %s | %s | %s | %s |" % (what, rate, fmt_rate(t), fmt_rate(s), ratio))
    if slurm_note:
        print()
        print("Slurm: " + slurm_note)
    if passes:
        print()
        print("scheduling pass, %d pending jobs over %d simulated nodes (each slot held), "
              "target < 20 ms:" % (a.pending, a.sim_agents))
        print()
        print("| queues | median | mean | passes | over 20 ms | slowest ≤ | coordinator CPU |")
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
        for what, (med, mean, n, over, slowest, cpu) in passes:
            ms = lambda v: "%.2f ms" % (v * 1000) if v is not None else "-"
            print("| %s | %s | %s | %d | %d | %s | %.0f ms/s |" %
                  (what, ms(med), ms(mean), n, over,
                   "-" if slowest is None else ("> 2 s" if slowest == float("inf")
                                                else "%g ms" % (slowest * 1000)), cpu * 1000))


if __name__ == "__main__":
    main()
