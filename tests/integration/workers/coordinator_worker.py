"""A stand-in for a JAX process, for tests: it checks trainlet's env contract. (XGBoost runs for
real: xgboost_train.py.)

    coordinator_worker.py jax      reads JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES, JAX_PROCESS_ID

Process 0 listens on the coordinator address, as jax.distributed does; every other one connects,
sends its id, and gets back the ids of all. Each prints
"<mode> <id> of <n>: ids 0..n-1 OK" and exits 0 when the ids are exactly 0..n-1.
"""
import os
import socket
import sys
import time


def contract(mode):
    env = os.environ
    if mode == "jax":
        host, _, port = env["JAX_COORDINATOR_ADDRESS"].rpartition(":")
        return host.strip("[]"), int(port), int(env["JAX_NUM_PROCESSES"]), int(env["JAX_PROCESS_ID"])
    raise SystemExit(f"unknown mode {mode!r}")


def recv_line(conn):
    data = b""
    while not data.endswith(b"\n"):
        chunk = conn.recv(4096)
        if not chunk:
            raise SystemExit("peer closed early")
        data += chunk
    return data.decode().strip()


def main():
    mode = sys.argv[1]
    host, port, n, me = contract(mode)
    if me == 0:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        srv = socket.socket(family, socket.SOCK_STREAM)
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        deadline = time.time() + 5  # the agent may still be handing the reserved port over
        while True:
            try:
                srv.bind((host, port))
                break
            except OSError:
                if time.time() > deadline:
                    raise
                time.sleep(0.05)
        srv.listen(n)
        srv.settimeout(60)
        peers = {}
        while len(peers) < n - 1:
            conn, _ = srv.accept()
            peers[int(recv_line(conn))] = conn
        ids = sorted([0] + list(peers))
        for conn in peers.values():
            conn.sendall((",".join(map(str, ids)) + "\n").encode())
            conn.close()
    else:
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
        ids = [int(x) for x in recv_line(conn).split(",")]
    ok = ids == list(range(n))
    print(f"{mode} {me} of {n} on {socket.gethostname()} via {host}:{port}: ids "
          f"{ids[0]}..{ids[-1]} {'OK' if ok else 'WRONG'}", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
