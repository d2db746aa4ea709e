#!/usr/bin/env python3
# What a new file costs where trainlet creates its rank logs, against renaming one made before
# (agent/step/spare_files.h): per round, 64 empty files created in a new dir under DIR, and 64
# files made earlier (untimed) renamed into another new dir and opened; 15 rounds, medians.
# Run it under the agent's state dir's file system; `chattr +T DIR` first to see the spread
# allocator's effect (common/platform/directory_spread.h). Removes what it made.
#
#   bench/launch/inode_cost.py DIR
import os
import statistics
import sys
import time

base = sys.argv[1]
spare = os.path.join(base, "spare")
os.makedirs(spare, exist_ok=True)
created, renamed = [], []
for r in range(15):
    for i in range(64):
        os.close(os.open(os.path.join(spare, f"s{r}_{i}"), os.O_CREAT | os.O_WRONLY, 0o600))
    d = os.path.join(base, f"c{r}")
    os.makedirs(d)
    t = time.perf_counter()
    for i in range(64):
        os.close(os.open(os.path.join(d, f"f{i}"), os.O_CREAT | os.O_WRONLY | os.O_APPEND, 0o600))
    created.append((time.perf_counter() - t) * 1000)
    d2 = os.path.join(base, f"r{r}")
    os.makedirs(d2)
    t = time.perf_counter()
    for i in range(64):
        os.rename(os.path.join(spare, f"s{r}_{i}"), os.path.join(d2, f"f{i}"))
        os.close(os.open(os.path.join(d2, f"f{i}"), os.O_WRONLY | os.O_APPEND))
    renamed.append((time.perf_counter() - t) * 1000)
    for dd in (d, d2):
        for i in range(64):
            os.unlink(os.path.join(dd, f"f{i}"))
        os.rmdir(dd)
os.rmdir(spare)
print(f"{base}: 64 files created: median {statistics.median(created):.2f} ms, "
      f"min {min(created):.2f}; 64 renamed and opened: median {statistics.median(renamed):.2f} ms, "
      f"min {min(renamed):.2f}")
