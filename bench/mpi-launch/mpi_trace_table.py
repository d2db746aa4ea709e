#!/usr/bin/env python3
"""mpi_trace_table: the table of run.sh --trace. Reads the "mpitrace rank R host H: k=v ..."
lines that mpi_trace.c prints (one per rank) from WORK/NAME.out for each run NAME
(trace-<contender>-<rep>), and prints, per contender, the median over every rank of every run
of each value, in milliseconds (counts as they are).

usage: mpi_trace_table.py WORK NAME...
"""
import re
import statistics
import sys

LABEL = {"direct": "direct (trainlet-pmix)", "base": "direct, base pmix",
         "mpirun": "mpirun via trainlet-exec (orted)", "ssh": "mpirun over SSH (orted)",
         "srun": "srun --mpi=pmix (slurmstepd)", "floor": "MPI floor (one trainlet-pmix, no launcher)"}
# (key, what it is, is a count)
ROWS = [
    ("pre_cpu", "exec + loading libraries, until main: CPU of the process", False),
    ("pre_runq", "  waiting for a CPU meanwhile", False),
    ("total_cpu", "CPU of the whole rank, exec to MPI_Finalize's return (all threads)", False),
    ("init", "MPI_Init, wall", False),
    ("init_cpu", "  main thread's CPU", False),
    ("init_runq", "  main thread waiting for a CPU (run queue)", False),
    ("init_other", "  main thread blocked (wall - CPU - run queue)", False),
    ("init_pcpu", "  CPU of all the rank's threads", False),
    ("orte_init", "  orte_init (ess pmi: PMIx_Init, session dir, ORTE frameworks)", False),
    ("opal_init", "    opal_init (in orte_init)", False),
    ("pmix_init", "    PMIx_Init", False),
    ("fence1", "  fence 1, wall", False),
    ("fence2", "  fence 2, wall", False),
    ("gets", "  PMIx_Get calls (count)", True),
    ("get_us", "  PMIx_Get, wall of all", False),
    ("get_max", "  PMIx_Get, the slowest", False),
    ("dlopens", "  dlopen calls (count, whole run)", True),
    ("dlopen_us", "  dlopen, wall of all", False),
    ("coll", "allreduce + barrier, wall", False),
    ("coll_cpu", "  main thread's CPU", False),
    ("coll_runq", "  main thread waiting for a CPU", False),
    ("fin", "MPI_Finalize, wall", False),
    ("fin_cpu", "  main thread's CPU", False),
    ("fin_runq", "  main thread waiting for a CPU", False),
    ("fin_fence", "  its fence(s), wall", False),
    ("pmix_fin", "  PMIx_Finalize", False),
    ("fences", "PMIx fences per rank (count)", True),
]
LINE = re.compile(r"mpitrace rank (\d+) host (\S+): (.*)$", re.M)


def main():
    work, names = sys.argv[1], sys.argv[2:]
    samples = {}  # kind -> list of dicts
    for name in names:
        kind = name.split("-")[1]
        text = open(f"{work}/{name}.out").read()
        ranks = LINE.findall(text)
        if not ranks:
            sys.exit(f"mpi_trace_table: no mpitrace line in {work}/{name}.out")
        for _, _, kv in ranks:
            d = {}
            for item in kv.split():
                k, _, v = item.partition("=")
                d[k] = int(v)
            d["init_other"] = d["init"] - d["init_cpu"] - d["init_runq"]
            samples.setdefault(kind, []).append(d)
    kinds = [k for k in ("direct", "base", "mpirun", "ssh", "srun", "floor") if k in samples]
    runs = len(names) // max(1, len(kinds))

    def med(kind, key):
        vals = [d.get(key, 0) for d in samples[kind]]
        return statistics.median(vals)

    def cell(kind, key, count):
        m = med(kind, key)
        return f"{m:.0f}" if count else f"{m / 1000:.1f}"

    print(f"trace: medians over every rank of {runs} runs each, ms (counts as counts)")
    print()
    print("| span | " + " | ".join(LABEL[k] for k in kinds) + " |")
    print("| --- |" + " ---: |" * len(kinds))
    for key, what, count in ROWS:
        print(f"| {what} | " + " | ".join(cell(k, key, count) for k in kinds) + " |")
    # The frameworks MPI_Init opens, the costliest first (by the largest median of any contender).
    fws = sorted({k for k in samples[kinds[0]][0] if k.startswith("fw.")} |
                 {k for kind in kinds for d in samples[kind] for k in d if k.startswith("fw.")},
                 key=lambda k: -max(med(kind, k) for kind in kinds))
    shown = [k for k in fws if max(med(kind, k) for kind in kinds) >= 500][:12]
    if shown:
        print()
        print("| framework open in MPI_Init (>= 0.5 ms somewhere) | " +
              " | ".join(LABEL[k] for k in kinds) + " |")
        print("| --- |" + " ---: |" * len(kinds))
        for k in shown:
            print(f"| {k[3:]} | " + " | ".join(cell(kind, k, False) for kind in kinds) + " |")


if __name__ == "__main__":
    main()
