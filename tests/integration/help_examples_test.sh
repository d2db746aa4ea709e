#!/usr/bin/env bash
# Every trainletctl command, down to each leaf subcommand, teaches by example: its --help has at
# least one indented "trainletctl ..." line, and exits 0. Needs no cluster.
set -euo pipefail
: "${TRAINLET_BIN:?TRAINLET_BIN must point at the bin directory of the build}"
python3 - "$TRAINLET_BIN/trainletctl" <<'PY'
import re, subprocess, sys

ctl = sys.argv[1]
missing, seen = [], 0

def walk(path):
    global seen
    r = subprocess.run([ctl] + path + ["--help"], capture_output=True, text=True, timeout=10)
    if r.returncode != 0:
        sys.exit("FAIL: trainletctl %s --help exited %d: %s" % (" ".join(path), r.returncode, r.stderr))
    out = r.stdout
    if path:
        seen += 1
        if not re.search(r"^\s+trainletctl \S", out, re.M):
            missing.append(" ".join(path))
    if "Subcommands:" in out:
        for line in out.split("Subcommands:")[1].splitlines():
            m = re.match(r"^  (\S+)\s", line)
            if m:
                walk(path + [m.group(1)])

walk([])
if seen < 20:
    sys.exit("FAIL: only %d commands found: the walk of the help is broken" % seen)
if missing:
    sys.exit("FAIL: --help without an example: " + ", ".join(missing))
print("PASS help_examples_test: %d commands, each with an example" % seen)
PY
