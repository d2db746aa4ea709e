#!/usr/bin/env python3
# CPU time per launch, per process of the launch: `perf record -a -g` (cpu-clock, 4999 Hz) over N
# `trainletctl apply --wait` launches of RANKS /bin/true on a local cluster of AGENTS agents, with
# each launch's window (CLOCK_MONOTONIC) in OUTDIR/windows.txt and the cluster's pids (the
# coordinator, the agents and their standby steps, this script) in OUTDIR/roots.txt, so that
# cpu_split.py counts only this launch's processes and their descendants, not other clusters'
# on a shared host. Needs root (perf -a). Every process started is stopped by pid (`local down`,
# perf with SIGINT). See bench/README.md.
#
#   bench/launch/cpu_record.py BIN_DIR N RANKS AGENTS OUTDIR && bench/launch/cpu_split.py OUTDIR
import os, subprocess, sys, tempfile, time, signal
B, N, R, A, OUT = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
os.makedirs(OUT, exist_ok=True)
d = tempfile.mkdtemp(prefix="trainlet-cpu-")
env = dict(os.environ, TRAINLET_HOME=d)
ctl = B + "/trainletctl"
def job(n):
    p = f"{d}/{n}.yaml"
    open(p, "w").write(f"""apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: {n}
spec:
  runtimeRef:
    name: plain
  trainer:
    numNodes: {A}
    numProcPerNode: {R//A}
    command: ["/bin/true"]
""")
    return p
subprocess.run([ctl, "local", "up", "--agents", str(A), "--slots", str(R//A), "--dir", d, "--timeout", "60"], env=env, check=True, capture_output=True)
perf = None
try:
    for w in range(2):
        subprocess.run([ctl, "apply", "-f", job(f"w{w}"), "--wait"], env=env, check=True, capture_output=True)
        subprocess.run([ctl, "delete", "trainjob", f"w{w}"], env=env, check=True, capture_output=True)
    roots = {os.getpid()}
    for f in os.listdir(d + "/pids"):
        pid = int(open(f"{d}/pids/{f}").read().split()[0]); roots.add(pid)
        for t in os.listdir(f"/proc/{pid}/task"):
            try: roots.update(int(x) for x in open(f"/proc/{pid}/task/{t}/children").read().split())
            except OSError: pass
    open(OUT + "/roots.txt", "w").write(" ".join(map(str, roots)))
    perf = subprocess.Popen(["perf", "record", "-a", "-g", "-F", "4999", "-k", "CLOCK_MONOTONIC", "-q", "-o", OUT + "/perf.data"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.0)
    wins = []
    for i in range(N):
        p = job(f"j{i}")
        t0 = time.monotonic()
        subprocess.run([ctl, "apply", "-f", p, "--wait"], env=env, check=True, capture_output=True)
        t1 = time.monotonic()
        wins.append((t0, t1)); print(f"launch {i}: {(t1-t0)*1000:.1f} ms", flush=True)
        time.sleep(0.2)
        subprocess.run([ctl, "delete", "trainjob", f"j{i}"], env=env, check=True, capture_output=True)
        time.sleep(0.3)
    with open(OUT + "/windows.txt", "w") as f:
        for a, b in wins: f.write(f"{a:.6f} {b:.6f}\n")
finally:
    if perf: perf.send_signal(signal.SIGINT); perf.wait()
    subprocess.run([ctl, "local", "down", "--dir", d], env=env, capture_output=True)
    subprocess.run(["rm", "-rf", d])
