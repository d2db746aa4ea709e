#!/usr/bin/env python3
"""mpi_floor: the MPI part of the benchmark with no launcher at all, for run.sh --floor.

One trainlet-pmix is started as trainlet-step starts it, for ONE node that holds every rank, and
waited for until its "ready" line (untimed: its start is launch work). Then the clock starts, all
ranks are spawned at once (posix_spawn in a loop, each with the benchmark's env plus the env the
server gave it), and it stops when the last one has exited. With every rank on one node, libpmix
completes each PMIx fence inside the server (no trainlet fence path, no agent, no coordinator),
and nothing of trainlet runs while the ranks do. What is timed is what any launcher must wait for
once it has started the ranks: their loading, MPI_Init, the allreduce + barrier and
MPI_Finalize, under the same OpenMPI settings (btl self,tcp over the bridge subnet) on the same
CPUs as the contenders, each rank bound to one CPU as trainlet binds the direct contender's (rank
r on CPU r mod CPUs; --no-bind leaves them free).

  mpi_floor.py --pmix BIN/trainlet-pmix --program PROG --ranks 6 --work DIR --out FILE \
      [--env KEY=VALUE]...

Prints "T0 T1" (CLOCK_REALTIME seconds, as bash's EPOCHREALTIME, so run.sh's profile table reads
the ranks' wall-clock stamps against them), and on stderr the server's CPU (all its threads) until
"ready" and while the ranks ran; the ranks' stdout and stderr go to FILE. Exits
non-zero, saying why, when the server does not start or a rank fails.
"""
import argparse
import os
import select
import signal
import socket
import subprocess
import sys
import time


def start_server(pmix, work, ranks, env):
    jobmap = f"{work}/map"
    with open(jobmap, "w") as f:
        f.write("trainlet-pmix-job-map 1\nnspace trainlet.floor.1\n")
        f.write(f"node {socket.gethostname()} {','.join(str(r) for r in range(ranks))}\n")
    os.makedirs(f"{work}/work", exist_ok=True)
    senv = dict(env)
    senv.update({
        "TRAINLET_PMIX_JOB_MAP": jobmap, "TRAINLET_JOB": "floor", "TRAINLET_ATTEMPT": "1",
        "TRAINLET_NODE_RANK": "0", "TRAINLET_RENDEZVOUS_ENDPOINT": f"ipc://{work}/none.sock",
        "TRAINLET_WORK_DIR": f"{work}/work",
    })
    senv.pop("LD_PRELOAD", None)
    p = subprocess.Popen([pmix], env=senv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    text = b""
    deadline = time.monotonic() + 30
    while b"ready\n" not in text and b"error " not in text and time.monotonic() < deadline:
        r, _, _ = select.select([p.stdout], [], [], 0.5)
        if r:
            chunk = os.read(p.stdout.fileno(), 65536)
            if not chunk:
                break
            text += chunk
    if b"ready\n" not in text:
        stop_server(p)
        sys.exit(f"mpi_floor: {pmix} did not start: {text.decode(errors='replace')!r}")
    per_rank = {r: {} for r in range(ranks)}
    for line in text.decode().splitlines():
        if line.startswith("env "):
            _, rank, kv = line.split(" ", 2)
            key, _, value = kv.partition("=")
            per_rank[int(rank)][key] = value
    return p, per_rank


def cpu_ms(pid):
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except OSError:
            pass
    return total / 1e6


def stop_server(p):
    p.send_signal(signal.SIGTERM)
    try:
        p.wait(timeout=5)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pmix", required=True)
    ap.add_argument("--program", required=True)
    ap.add_argument("--ranks", type=int, default=6)
    ap.add_argument("--work", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--env", action="append", default=[])
    ap.add_argument("--no-bind", action="store_true",
                    help="leave the ranks unbound (default: rank r on CPU r mod CPUs)")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    env = dict(os.environ)
    env.update(kv.split("=", 1) for kv in args.env)
    server, per_rank = start_server(args.pmix, args.work, args.ranks, env)
    started_cpu = cpu_ms(server.pid)
    try:
        envs = []
        for r in range(args.ranks):
            e = dict(env)
            e.update(per_rank[r])
            envs.append(e)
        out = os.open(args.out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
        acts = [(os.POSIX_SPAWN_DUP2, out, 1), (os.POSIX_SPAWN_DUP2, out, 2),
                (os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDONLY, 0)]
        argv = [args.program]
        # Bound as trainlet binds the contenders' ranks: a node's local rank i to its i-th CPU
        # (every namespace host has this machine's CPUs), here rank r to CPU r mod CPUs. The
        # child inherits the affinity set just before its spawn.
        cpus = sorted(os.sched_getaffinity(0))
        t0 = time.time()
        pids = []
        for r in range(args.ranks):
            if not args.no_bind:
                os.sched_setaffinity(0, {cpus[r % len(cpus)]})
            pids.append(os.posix_spawn(args.program, argv, envs[r], file_actions=acts))
        os.sched_setaffinity(0, set(cpus))
        bad = []
        for pid in pids:
            _, status = os.waitpid(pid, 0)
            if status != 0:
                bad.append(status)
        t1 = time.time()
        serving_cpu = cpu_ms(server.pid) - started_cpu
        os.close(out)
    finally:
        stop_server(server)
    if bad:
        sys.exit(f"mpi_floor: {len(bad)} rank(s) failed (wait status {bad[0]}); see {args.out}")
    print(f"{t0:.6f} {t1:.6f}")
    print(f"mpi_floor: trainlet-pmix CPU: {started_cpu:.1f} ms to ready, {serving_cpu:.1f} ms "
          "serving the ranks", file=sys.stderr)


if __name__ == "__main__":
    main()
