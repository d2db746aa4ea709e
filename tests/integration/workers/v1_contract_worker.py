"""A stand-in for a PaddleJob or JAXJob replica, for tests: it checks, to the letter, the env the
Training Operator injects (release-1.9, pkg/controller.v1/paddlepaddle/envvar.go and
pkg/controller.v1/jax/envvar.go), with trainlet's node addresses and reserved ports where the
operator writes pod DNS names and container ports.

    v1_contract_worker.py paddle|jax JOB LAYOUT NODES_JSON

JOB is the job's name; LAYOUT the replicas in rank order ("Master:1,Worker:2"); NODES_JSON a file
mapping each node's name to its advertised address. The rank's own identity comes from trainlet
(TRAINLET_RANK: its replica type and index through LAYOUT; TRAINLET_NODE: its address through
NODES_JSON). The rendezvous replica (Paddle: Master 0, or Worker 0 without a Master; JAX: Worker 0)
listens on the endpoint the env names, so the port is real and the address its own; every other
replica connects there and is told the endpoint's node address, which its env must name.

Prints "<mode> <type> <index>: env OK" and exits 0, or prints "MISMATCH <variable>: ..." for each
difference and exits 1. Bounded by an alarm.
"""
import json
import os
import signal
import socket
import sys
import time


class Check:
    def __init__(self):
        self.errors = []

    def eq(self, name, want):
        got = os.environ.get(name)
        if got != want:
            self.errors.append(f"MISMATCH {name}: got {got!r}, want {want!r}")

    def absent(self, name):
        if name in os.environ:
            self.errors.append(f"MISMATCH {name}: set to {os.environ[name]!r}, the operator sets none")


def identity(layout):
    """(type, index, total, types) of this rank from LAYOUT and TRAINLET_RANK; type and index
    are None for a rank the layout does not have (the job has more replicas than expected)."""
    ranks = []
    for part in layout.split(","):
        rtype, count = part.split(":")
        ranks += [(rtype, i) for i in range(int(count))]
    rank = int(os.environ["TRAINLET_RANK"])
    if rank >= len(ranks):
        return None, None, len(ranks), [t for t, _ in ranks]
    return ranks[rank][0], ranks[rank][1], len(ranks), [t for t, _ in ranks]


def rendezvous(host, port, endpoint, n, me, check):
    """The endpoint listens on host:port and tells the n - 1 others its own address; they
    connect, say who they are, and get that address back. Returns the endpoint's address."""
    if endpoint:
        srv = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        deadline = time.time() + 5  # the agent may still be handing the reserved port over
        while True:
            try:
                srv.bind((host, port))
                break
            except OSError as e:
                if time.time() > deadline:
                    check.errors.append(f"MISMATCH endpoint {host}:{port}: cannot listen there: {e}")
                    return None
                time.sleep(0.05)
        srv.listen(n)
        srv.settimeout(60)
        for _ in range(n - 1):
            conn, _ = srv.accept()
            conn.recv(64)
            conn.sendall((host + "\n").encode())
            conn.close()
        return host
    deadline = time.time() + 60
    while True:
        try:
            conn = socket.create_connection((host, port), timeout=5)
            break
        except OSError:
            if time.time() > deadline:
                raise
            time.sleep(0.1)
    conn.sendall(f"{me}\n".encode())
    data = b""
    while not data.endswith(b"\n"):
        chunk = conn.recv(256)
        if not chunk:
            raise SystemExit("the endpoint closed early")
        data += chunk
    return data.decode().strip()


def port_of(check, name, value):
    try:
        port = int(value)
        if 0 < port < 65536:
            return port
    except (TypeError, ValueError):
        pass
    check.errors.append(f"MISMATCH {name}: {value!r} holds no port")
    return None


def paddle(job, rtype, index, total, types, mine, check):
    ps_mode = "Master" in types
    check.eq("PYTHONUNBUFFERED", "1")
    check.eq("PADDLE_JOB_ID", job)
    check.eq("PADDLE_NNODES", str(total))
    # The operator: index 0 of any type in collective mode, Master 0 in PS mode.
    endpoint = index == 0 and (not ps_mode or rtype == "Master")
    if endpoint:
        check.eq("POD_IP_DUMMY", mine)
    else:
        check.absent("POD_IP_DUMMY")
    if ps_mode and rtype == "Master":
        check.eq("PADDLE_SERVER_NUM", "1")
        check.absent("PADDLE_TRAINER_NUM")
    elif ps_mode:
        check.eq("PADDLE_TRAINER_NUM", "1")
        check.absent("PADDLE_SERVER_NUM")
    else:
        check.absent("PADDLE_SERVER_NUM")
        check.absent("PADDLE_TRAINER_NUM")
    host, _, port = os.environ.get("PADDLE_MASTER", "").rpartition(":")
    port = port_of(check, "PADDLE_MASTER", port)
    if endpoint and host != mine:
        check.errors.append(f"MISMATCH PADDLE_MASTER: {host!r} is not this replica's address {mine!r}")
    if port is None or check.errors:
        return
    where = rendezvous(host, port, endpoint, total, f"{rtype}-{index}", check)
    check.eq("PADDLE_MASTER", f"{where}:{port}")


def jax(job, rtype, index, total, types, mine, check):
    check.eq("PYTHONUNBUFFERED", "1")
    check.eq("NUM_PROCESSES", str(total))
    check.eq("PROCESS_ID", str(index))
    for name in ("JAX_COORDINATOR_ADDRESS", "JAX_NUM_PROCESSES", "JAX_PROCESS_ID"):
        check.absent(name)  # trainlet's v2 names: not the operator's
    endpoint = rtype == "Worker" and index == 0
    host = os.environ.get("COORDINATOR_ADDRESS", "")
    port = port_of(check, "COORDINATOR_PORT", os.environ.get("COORDINATOR_PORT"))
    if endpoint:
        check.eq("COORDINATOR_ADDRESS", mine)
    if port is None or check.errors:
        return
    where = rendezvous(host, port, endpoint, total, str(index), check)
    check.eq("COORDINATOR_ADDRESS", where)


def main():
    signal.alarm(60)
    mode, job, layout, nodes_file = sys.argv[1:5]
    rtype, index, total, types = identity(layout)
    if rtype is None:
        # More replicas than expected: every rank, this one too, names the world size it got.
        check = Check()
        if "NUM_PROCESSES" in os.environ:  # JAX's world size
            check.eq("NUM_PROCESSES", str(total))
        check.errors.append(f"MISMATCH rank {os.environ['TRAINLET_RANK']}: not among the {total} expected")
        for e in check.errors:
            print(f"{mode}: {e}", flush=True)
        return 1
    with open(nodes_file) as f:
        mine = json.load(f)[os.environ["TRAINLET_NODE"]]
    check = Check()
    {"paddle": paddle, "jax": jax}[mode](job, rtype, index, total, types, mine, check)
    for e in check.errors:
        print(f"{mode} {rtype} {index}: {e}", flush=True)
    if check.errors:
        return 1
    print(f"{mode} {rtype} {index}: env OK", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
