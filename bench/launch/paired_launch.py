#!/usr/bin/env python3
# Paired launch latency of two or more builds of trainlet, for changes smaller than the noise of
# a shared machine: one one-agent local cluster per build, all up at once, and `trainletctl apply
# --wait` of the same N-rank /bin/true job timed on each in turn (the order reversed every round),
# so a burst of load falls on neighbouring samples of every build. Prints each build's median and
# the median of its per-round difference against the first build. Each cluster is taken down with
# `trainletctl local down` (by the pids it recorded). See bench/README.md.
#
#   bench/launch/paired_launch.py ROUNDS RANKS BIN_DIR_A BIN_DIR_B [...]
import os, shutil, statistics, subprocess, sys, tempfile, time
n = int(sys.argv[1]); ranks = int(sys.argv[2]); bins = sys.argv[3:]
variants = [f"{i}-{os.path.basename(b.rstrip('/'))}" for i, b in enumerate(bins)]
bin_of = dict(zip(variants, bins))
dirs = {}
def job(v, name):
    d = dirs[v]; y = f"{d}/{name}.yaml"
    open(y,"w").write(f"""apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: {name}
spec:
  runtimeRef:
    name: plain
  trainer:
    numNodes: 1
    numProcPerNode: {ranks}
    command: ["/bin/true"]
""")
    env = dict(os.environ, TRAINLET_HOME=d)
    ctl = f"{bin_of[v]}/trainletctl"
    t = time.perf_counter()
    subprocess.run([ctl,"apply","-f",y,"--wait"],env=env,check=True,capture_output=True)
    ms = (time.perf_counter()-t)*1000
    subprocess.run([ctl,"delete","trainjob",name],env=env,check=True,capture_output=True)
    return ms
res = {v: [] for v in variants}
try:
    for v in variants:
        dirs[v] = tempfile.mkdtemp(prefix=f"trainlet-paired-{v}-")
        subprocess.run([f"{bin_of[v]}/trainletctl", "local", "up", "--agents", "1", "--slots",
                        str(ranks), "--dir", dirs[v], "--timeout", "60"],
                       check=True, capture_output=True)
    for v in variants: job(v, "warm")
    for i in range(n):
        order = variants if i % 2 == 0 else list(reversed(variants))
        for v in order:
            res[v].append(job(v, f"j{i}"))
            time.sleep(0.15)
finally:
    for v in dirs:
        subprocess.run([f"{bin_of[v]}/trainletctl","local","down","--dir",dirs[v]],capture_output=True)
        shutil.rmtree(dirs[v], ignore_errors=True)
base = res[variants[0]]
for v in variants:
    r = res[v]
    diffs = [a-b for a,b in zip(r, base)]
    print(f"{v:6s} median {statistics.median(r):6.1f} ms  min {min(r):6.1f}  paired diff vs {variants[0]}: median {statistics.median(diffs):+6.1f} ms")
