#!/usr/bin/env python3
"""A training rank that checkpoints when warned, for the preemption tests (issue 14).

It counts steps (one every 20 ms) from the step in $CKPT_DIR/ckpt, if there is one, and
notes what happens to it, one line each, in $CKPT_DIR/events (time in ms since the epoch first):
  <ms> start attempt=<TRAINLET_ATTEMPT> from=<step> preempted=<TRAINLET_PREEMPTED> reason=<...>
  <ms> usr1 step=<step>           the warning came; the checkpoint is written
  <ms> term step=<step>           SIGTERM came
On SIGUSR1 (or $CKPT_SIGNAL) it writes $CKPT_DIR/ckpt atomically and exits 0, unless
$CKPT_STAY=1: then it keeps running (to see SIGTERM come after the grace), and exits 143 on
SIGTERM. $CKPT_DIR/progress always holds the current step. With $CKPT_STEPS it exits 0 (noting
"done") once it has counted that many steps, across attempts.
"""
import os
import signal
import sys
import time

ckpt_dir = os.environ["CKPT_DIR"]
stay = os.environ.get("CKPT_STAY") == "1"
warning = getattr(signal, os.environ.get("CKPT_SIGNAL", "SIGUSR1"))
step = 0


def now_ms():
    return int(time.time() * 1000)


def note(text):
    with open(os.path.join(ckpt_dir, "events"), "a") as f:
        f.write(f"{now_ms()} {text}\n")


def write_atomic(name, text):
    # Per process: a rank of the next attempt may write beside one still in its grace.
    tmp = os.path.join(ckpt_dir, f"{name}.tmp.{os.getpid()}")
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, os.path.join(ckpt_dir, name))


def on_warning(signum, frame):
    write_atomic("ckpt", f"{step}\n")
    note(f"usr1 step={step}")
    if not stay:
        sys.exit(0)


def on_term(signum, frame):
    note(f"term step={step}")
    sys.exit(143)


try:
    with open(os.path.join(ckpt_dir, "ckpt")) as f:
        step = int(f.read().strip())
except FileNotFoundError:
    pass
signal.signal(warning, on_warning)
signal.signal(signal.SIGTERM, on_term)
env = os.environ
note(f"start attempt={env.get('TRAINLET_ATTEMPT')} from={step} "
     f"preempted={env.get('TRAINLET_PREEMPTED', '')} reason={env.get('TRAINLET_RESTART_REASON', '')}")
last = int(env.get("CKPT_STEPS", "0"))
while not last or step < last:
    step += 1
    write_atomic("progress", f"{step}\n")
    time.sleep(0.02)
note(f"done step={step}")
