"""A rank that uses the rendezvous C API through ctypes (run by tests/integration/rendezvous_test.sh).

usage: rdzv_rank.py LIB all       put addr/<rank>, fence, read every rank's address and check it
       rdzv_rank.py LIB kill DIR  rank 5 SIGKILLs itself (writing DIR/killed_at first) while the
                                  others wait in a fence; they print how the fence ended
"""
import ctypes
import os
import signal
import sys
import time

lib = ctypes.CDLL(sys.argv[1])
lib.trainlet_rdzv_open.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
lib.trainlet_rdzv_put.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]
lib.trainlet_rdzv_get.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t,
                                  ctypes.POINTER(ctypes.c_size_t), ctypes.c_int]
lib.trainlet_rdzv_fence.argtypes = [ctypes.c_void_p, ctypes.c_int]
lib.trainlet_rdzv_count.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t)]
lib.trainlet_rdzv_last_error.argtypes = [ctypes.c_void_p]
lib.trainlet_rdzv_last_error.restype = ctypes.c_char_p
lib.trainlet_rdzv_close.argtypes = [ctypes.c_void_p]

rank = int(os.environ["TRAINLET_RANK"])
world = int(os.environ["TRAINLET_WORLD_SIZE"])
node = os.environ["TRAINLET_NODE"]
h = ctypes.c_void_p()


def check(rc, what):
    if rc != 0:
        print(f"rank {rank}: {what} failed: code {rc}: {lib.trainlet_rdzv_last_error(h).decode()}",
              flush=True)
        sys.exit(3)


def get(key, timeout_ms):
    buf = ctypes.create_string_buffer(256)
    n = ctypes.c_size_t()
    check(lib.trainlet_rdzv_get(h, key.encode(), buf, 256, ctypes.byref(n), timeout_ms), "get " + key)
    return buf.raw[:n.value].decode()


check(lib.trainlet_rdzv_open(ctypes.byref(h)), "open")
mode = sys.argv[2]
if mode == "all":
    me = f"{node}:{rank}"
    check(lib.trainlet_rdzv_put(h, f"addr/{rank}".encode(), me.encode(), len(me)), "put")
    check(lib.trainlet_rdzv_fence(h, 30000), "fence 1")
    bad = [r for r in range(world) if not get(f"addr/{r}", 0).endswith(f":{r}")]
    count = ctypes.c_size_t()
    check(lib.trainlet_rdzv_count(h, ctypes.byref(count)), "count")
    # A second round: each rank reads its right neighbour's answer, put after fence 1.
    check(lib.trainlet_rdzv_put(h, f"seen/{rank}".encode(), str(count.value).encode(), len(str(count.value))), "put")
    check(lib.trainlet_rdzv_fence(h, 30000), "fence 2")
    neighbour = get(f"seen/{(rank + 1) % world}", 0)
    if bad or count.value != world or neighbour != str(world):
        print(f"rank {rank}: BAD addresses {bad} count {count.value} neighbour {neighbour}", flush=True)
        sys.exit(4)
    print(f"rank {rank} read {world} addresses", flush=True)
elif mode == "kill":
    # The attempt's other ranks are stopped (SIGTERM) right after their fence fails: report first.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if rank == 5:
        time.sleep(1.0)
        with open(os.path.join(sys.argv[3], "killed_at"), "w") as f:
            f.write(f"{time.time()}\n")
        os.kill(os.getpid(), signal.SIGKILL)
    rc = lib.trainlet_rdzv_fence(h, -1)
    print(f"rank {rank} fence ended at {time.time()} code {rc}: "
          f"{lib.trainlet_rdzv_last_error(h).decode()}", flush=True)
    sys.exit(3 if rc != 0 else 0)
lib.trainlet_rdzv_close(h)
