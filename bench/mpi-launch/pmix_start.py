#!/usr/bin/env python3
"""trainlet-pmix's start-up, alone: wall time from exec to its "ready" line and the CPU it used
until then (every thread's /proc/<pid>/task/*/schedstat, in ns), medians over --reps, variants
alternated within each rep so that the machine's load hits them alike.

  bench/mpi-launch/pmix_start.py --reps 15 --variant main=/tmp/main-trainlet-pmix \
      --variant new=build/bin/trainlet-pmix \
      --variant new+xml=build/bin/trainlet-pmix:TRAINLET_PMIX_TOPOLOGY_XML=/tmp/live.xml

A variant is NAME=BINARY[:KEY=VALUE,...] (extra env). The server runs as trainlet-step runs it
(agent/step/step_runner.cpp), for one node of 2 ranks, in a temp dir that is removed after.
"""
import argparse
import os
import select
import shutil
import signal
import socket
import statistics
import subprocess
import tempfile
import time


def cpu_ns(pid):
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except OSError:
            pass
    return total


def start_once(binary, extra, work):
    env = dict(os.environ)
    env.update(extra)
    env.update({
        "TRAINLET_PMIX_JOB_MAP": f"{work}/map", "TRAINLET_JOB": "t", "TRAINLET_ATTEMPT": "1",
        "TRAINLET_NODE_RANK": "0", "TRAINLET_RENDEZVOUS_ENDPOINT": f"ipc://{work}/none.sock",
        "TRAINLET_WORK_DIR": f"{work}/work",
    })
    t0 = time.monotonic()
    p = subprocess.Popen([binary], env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    text = b""
    deadline = t0 + 20
    while b"ready\n" not in text and b"error " not in text and time.monotonic() < deadline:
        r, _, _ = select.select([p.stdout], [], [], 0.5)
        if r:
            chunk = os.read(p.stdout.fileno(), 65536)
            if not chunk:
                break
            text += chunk
    wall = time.monotonic() - t0
    cpu = cpu_ns(p.pid)
    p.send_signal(signal.SIGTERM)
    try:
        p.wait(timeout=10)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
    if b"ready\n" not in text:
        raise SystemExit(f"{binary}: not ready: {text!r}")
    return wall * 1000, cpu / 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--variant", action="append", required=True)
    args = ap.parse_args()
    variants = []
    for v in args.variant:
        name, spec = v.split("=", 1)
        binary, _, env = spec.partition(":")
        extra = dict(kv.split("=", 1) for kv in env.split(",") if kv)
        variants.append((name, binary, extra))
    work = tempfile.mkdtemp(prefix="trainlet-pmix-start-")
    try:
        os.mkdir(f"{work}/work")
        with open(f"{work}/map", "w") as f:
            f.write(f"trainlet-pmix-job-map 1\nnspace trainlet.t.1\nnode {socket.gethostname()} 0,1\n")
        results = {name: [] for name, _, _ in variants}
        for _ in range(args.reps):
            for name, binary, extra in variants:
                results[name].append(start_once(binary, extra, work))
        print(f"load average {os.getloadavg()[0]:.1f}; medians (min) of {args.reps}, ms")
        print(f"{'variant':<24} {'wall to ready':>18} {'CPU to ready':>18}")
        for name, _, _ in variants:
            walls = [w for w, _ in results[name]]
            cpus = [c for _, c in results[name]]
            print(f"{name:<24} {statistics.median(walls):>9.1f} ({min(walls):>6.1f})"
                  f" {statistics.median(cpus):>9.1f} ({min(cpus):>6.1f})")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
