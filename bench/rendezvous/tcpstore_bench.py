"""PyTorch TCPStore doing what bench/rendezvous times for trainlet: N ranks each set their
address, meet at a barrier, then read every rank's address. Run with Debian's /usr/bin/python3.

usage: tcpstore_bench.py N ITERS [GET_SAMPLE]
All N clients live in this process and are driven from one thread, as the trainlet side drives
its N handles. TCPStore (torch 1.13) has no multi_get, so get-all is N round trips per rank; past
GET_SAMPLE readers are timed, and get-all is reported per rank (ms).
Prints one line per iteration: "iter I fence_ms F getall_ms G".
"""
import datetime
import sys
import time

import torch.distributed as dist

n = int(sys.argv[1])
iters = int(sys.argv[2])
sample = int(sys.argv[3]) if len(sys.argv) > 3 else n
timeout = datetime.timedelta(seconds=600)
master = dist.TCPStore("127.0.0.1", 0, None, True, timeout, wait_for_workers=False)
port = master.port
clients = [dist.TCPStore("127.0.0.1", port, None, False, timeout) for _ in range(n)]
value = b"10.0.0.1:29500"

for it in range(iters + 1):  # iteration 0 warms up
    keys = [f"{it}/addr/{r}" for r in range(n)]
    t0 = time.perf_counter()
    for r, c in enumerate(clients):
        c.set(keys[r], value)
    # Barrier as torch's store-based barriers do it: every rank adds, the last one to arrive
    # opens the gate, everyone waits on the gate.
    for c in clients:
        if c.add(f"{it}/arrive", 1) == n:
            c.set(f"{it}/go", b"1")
    for c in clients:
        c.wait([f"{it}/go"])
    t1 = time.perf_counter()
    readers = clients[: min(sample, n)]
    for c in readers:
        for k in keys:
            c.get(k)
    t2 = time.perf_counter()
    getall = (t2 - t1) * 1000 / len(readers)  # per rank
    if it > 0:
        print(f"iter {it} fence_ms {(t1 - t0) * 1000:.3f} getall_ms {getall:.4f}", flush=True)
