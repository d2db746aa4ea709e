#!/usr/bin/env python3
# The report of cpu_record.py: CPU ms per launch by command name, counting only samples inside
# the launches' windows and of the recorded cluster's processes and their descendants (perf's
# fork events); then, for the TOP_COMMS busiest, the functions with the most time under them
# (frame-pointer call chains: user frames of binaries without frame pointers show as [unknown]),
# and for each of SELF_COMMS (comma-separated) the functions with the most time of their own.
#
#   bench/launch/cpu_split.py OUTDIR [TOP=25] [TOP_COMMS=6] [SELF_COMMS]
import subprocess, sys, collections, re
OUT = sys.argv[1]; top = int(sys.argv[2]) if len(sys.argv) > 2 else 25
wins = [tuple(map(float, l.split())) for l in open(OUT + "/windows.txt")]
n = len(wins)
roots = set(map(int, open(OUT + "/roots.txt").read().split()))
ours = set(roots)
fk = re.compile(r"PERF_RECORD_FORK\((\d+):(\d+)\):\((\d+):(\d+)\)")
q = subprocess.run(["perf", "script", "-i", OUT + "/perf.data", "--show-task-events", "-F", "comm,pid,tid"], capture_output=True, text=True)
for line in q.stdout.splitlines():
    m = fk.search(line)
    if m and int(m.group(3)) in ours: ours.add(int(m.group(1)))
p = subprocess.Popen(["perf", "script", "-i", OUT + "/perf.data", "-F", "comm,pid,tid,time,period,ip,sym,dso"], stdout=subprocess.PIPE, text=True, stderr=subprocess.DEVNULL)
bycomm = collections.Counter(); leaf = collections.defaultdict(collections.Counter); incl = collections.defaultdict(collections.Counter)
cur = None; stack = []
def flush():
    global cur, stack
    if cur is None:
        stack = []; return
    comm, t, per = cur
    if any(a <= t <= b for a, b in wins):
        bycomm[comm] += per
        if stack: leaf[comm][stack[0]] += per
        for s in set(stack): incl[comm][s] += per
    cur = None; stack = []
hdr = re.compile(r"^(\S.*?)\s+(\d+)/(\d+)\s+([\d.]+):\s+(\d+)\s")
for line in p.stdout:
    if not line.strip():
        flush(); continue
    if not line.startswith((" ", "\t")):
        flush()
        m = hdr.match(line)
        if m and int(m.group(2)) in ours: cur = (m.group(1), float(m.group(4)), int(m.group(5)))
        continue
    parts = line.strip().split(None, 1)
    if len(parts) == 2:
        sym = parts[1].rsplit(" (", 1)[0]
        stack.append(sym[:90])
flush()
tot = sum(bycomm.values())
print(f"launches {n}; CPU ms per launch by comm (sampled):")
for c, v in bycomm.most_common(20): print(f"  {c:20s} {v/1e6/n:8.2f}")
print(f"  {'TOTAL':20s} {tot/1e6/n:8.2f}")
for c, _ in bycomm.most_common(int(sys.argv[3]) if len(sys.argv) > 3 else 6):
    print(f"\n== {c}: top inclusive")
    for s, v in incl[c].most_common(top): print(f"  {v/1e6/n:7.2f}  {s}")
for c in (sys.argv[4].split(",") if len(sys.argv) > 4 else []):
    print(f"\n== {c}: top self")
    for s, v in leaf[c].most_common(top): print(f"  {v/1e6/n:7.2f}  {s}")
