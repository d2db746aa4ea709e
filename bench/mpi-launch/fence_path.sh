#!/usr/bin/env bash
# bench/mpi-launch/fence_path.sh: one PMIx fence round of a direct-launch job, alone, old against
# new. Three namespace hosts (tests/integration/netns_lib.sh) with one agent each and a
# coordinator; a 3 x 2 direct-launch job of fence_timing.c (a bare PMIx client: PMIx_Init, 6
# fences with data, 6 without) per repetition, the node's trainlet-pmix alternating between this
# build's and --base-pmix's (a rename between jobs, as run.sh --base-pmix does). Prints, per
# server, the median over ranks, rounds 2-6 and repetitions of a fence with and without data, and
# each one's ratio to this build's. Much lighter than run.sh (no ssh, no srun, no MPI), so it fits a quick before/after.
#
# usage: bench/mpi-launch/fence_path.sh [--reps N] [--bin BUILD/bin] [--base-pmix FILE]
#                                       [--pmix NAME=FILE]... [--strace DIR]
#   --reps N          jobs per server (default 9), alternated
#   --bin DIR         the build's bin directory (default $TRAINLET_BIN, else <repo>/build/bin)
#   --base-pmix FILE  another build's trainlet-pmix (e.g. main's) to alternate with this one's,
#                     reported as "base"; the same as --pmix base=FILE
#   --pmix NAME=FILE  one more server to alternate with (any number; NAME: letters, digits);
#                     without any, only this build's runs
#   --strace DIR      afterwards, one more job of this build's server with every process on the
#                     fence path under strace -f -tt (the coordinator, the three agents, each
#                     node's trainlet-pmix and the ranks) into DIR/<process>.<pid>: the map of
#                     docs/rendezvous.md, "One fence round, hop by hop", is read from such files
# Needs root (network namespaces). Not a ctest test.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
REPS=9
EXTRA=()  # NAME=FILE of every other server
STRACE_DIR=""
BIN_DIR=${TRAINLET_BIN:-$SRC/build/bin}
while [ $# -gt 0 ]; do
  case "$1" in
    --reps) REPS=${2:?--reps needs a number}; shift 2 ;;
    --bin) BIN_DIR=${2:?--bin needs a directory}; shift 2 ;;
    --base-pmix) EXTRA+=("base=${2:?--base-pmix needs a file}"); shift 2 ;;
    --pmix) EXTRA+=("${2:?--pmix needs NAME=FILE}"); shift 2 ;;
    --strace) STRACE_DIR=${2:?--strace needs a directory}; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "fence_path.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" = 0 ] || { echo "fence_path.sh: needs root (network namespaces)" >&2; exit 2; }
[ -x "$BIN_DIR/trainlet-pmix" ] || { echo "fence_path.sh: no trainlet-pmix in $BIN_DIR" >&2; exit 2; }
for e in "${EXTRA[@]}"; do
  [[ ${e%%=*} =~ ^[A-Za-z0-9]+$ ]] && [ "${e%%=*}" != new ] \
    || { echo "fence_path.sh: --pmix $e: NAME must be letters and digits, not new" >&2; exit 2; }
  [ -x "${e#*=}" ] || { echo "fence_path.sh: --pmix $e: ${e#*=} is not executable" >&2; exit 2; }
done
pkg-config --exists pmix || { echo "fence_path.sh: needs libpmix-dev (pkg-config pmix)" >&2; exit 2; }

# The agents run from a copy of the bin dir, whose trainlet-pmix is swapped between jobs.
COPY=$(mktemp -d /tmp/trainlet-fence-path.XXXXXX)
for b in trainletctl trainlet-agent trainlet-coordinator trainlet-step trainlet-pmix \
    trainlet-initializer; do
  [ ! -e "$BIN_DIR/$b" ] || cp -L "$BIN_DIR/$b" "$COPY/"  # the files: the step starts the server beside itself
done
cp "$BIN_DIR/trainlet-pmix" "$COPY/trainlet-pmix.new"
for e in "${EXTRA[@]}"; do cp "${e#*=}" "$COPY/trainlet-pmix.${e%%=*}"; done
export TRAINLET_BIN=$COPY TRAINLET_SOURCE_DIR=$SRC
source "$SRC/tests/integration/lib.sh"
source "$SRC/tests/integration/netns_lib.sh"
trap 'rm -rf "$COPY"; cleanup' EXIT
gcc -O2 "$HERE/fence_timing.c" -o "$COPY/fence-timing" $(pkg-config --cflags --libs pmix)

use_pmix() {  # use_pmix new|NAME
  cp "$COPY/trainlet-pmix.$1" "$COPY/trainlet-pmix.tmp"
  mv -f "$COPY/trainlet-pmix.tmp" "$COPY/trainlet-pmix"
}

start_netns_cluster 3
SUBNET="$NETNS_SUBNET.0/24"
echo "cluster up ($NETNS_MODE); load: $(cut -d' ' -f1-3 /proc/loadavg)"

# run_job NAME [COMMAND...]: the 3 x 2 job of COMMAND (default: fence_timing); its ranks' lines
# go to $WORK/NAME.out.
run_job() {
  local file="$WORK/$1.yaml" a
  local cmd=("${@:2}")
  [ ${#cmd[@]} -gt 0 ] || cmd=("$COPY/fence-timing")
  {
    printf 'apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata:\n  name: %s\n' "$1"
    printf 'spec:\n  runtimeRef:\n    name: mpi-direct\n  trainer:\n'
    printf '    numNodes: 3\n    numProcPerNode: 2\n'
    printf '    command:\n'
    for a in "${cmd[@]}"; do printf '      - "%s"\n' "$a"; done
  } > "$file"
  "$CTL" apply -f "$file" --wait --timeout=120s > /dev/null \
    || fail "$1 did not complete: $("$CTL" describe trainjob "$1" 2>&1)"
  "$CTL" logs "$1" > "$WORK/$1.out"
  [ "$(grep -c 'fence rank [0-9]* on ' "$WORK/$1.out" || true)" = 6 ] \
    || fail "$1: expected 6 ranks' lines: $(cat "$WORK/$1.out")"
  "$CTL" delete trainjob "$1" --timeout 60s > /dev/null
}

servers=(new)
for e in "${EXTRA[@]}"; do servers+=("${e%%=*}"); done
for s in "${servers[@]}"; do use_pmix "$s"; run_job "warm-$s"; done
names=()
for r in $(seq 1 "$REPS"); do
  for s in "${servers[@]}"; do
    use_pmix "$s"
    run_job "$s-$r"
    names+=("$s-$r")
  done
done
use_pmix new
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$WORK" "${servers[*]}" "${names[@]}" <<'PYEOF'
import re, statistics, sys
work, order, names = sys.argv[1], sys.argv[2].split(), sys.argv[3:]
rows = {}
for name in names:
    kind = name.split("-")[0]
    for l in re.findall(r"fence rank \d+ on \S+: init \d+ data ([\d ]+) nodata ([\d ]+)",
                        open(f"{work}/{name}.out").read()):
        r = rows.setdefault(kind, ([], []))
        r[0].extend(int(x) for x in l[0].split()[1:])  # rounds 2..6: the ranks are in step
        r[1].extend(int(x) for x in l[1].split()[1:])
print("\nPMIx fence rounds, 3 hosts x 2 ranks, bare PMIx client, medians over ranks x rounds 2-6 "
      "x runs, ms (samples)")
print("| trainlet-pmix | fence with data | fence without data | new / this, with | without |")
print("| --- | ---: | ---: | ---: | ---: |")
med = {k: (statistics.median(rows[k][0]), statistics.median(rows[k][1])) for k in order}
# Paired: each repetition's median of this build's against the same repetition's of the other
# server (run next to it), so that the host's load drifting between repetitions cancels out.
per = {}
for name in names:
    kind, rep = name.split("-")
    for l in re.findall(r"fence rank \d+ on \S+: init \d+ data ([\d ]+) nodata ([\d ]+)",
                        open(f"{work}/{name}.out").read()):
        r = per.setdefault((kind, rep), ([], []))
        r[0].extend(int(x) for x in l[0].split()[1:])
        r[1].extend(int(x) for x in l[1].split()[1:])
def paired(k, i):
    reps = sorted({rep for (kind, rep) in per if kind == k})
    return statistics.median(statistics.median(per[("new", r)][i]) / statistics.median(per[(k, r)][i])
                             for r in reps)
for k in order:
    d, n = rows[k]
    print(f"| {k} | {med[k][0] / 1000:.2f} ({len(d)}) | {med[k][1] / 1000:.2f} ({len(n)}) | "
          f"{paired(k, 0):.2f} | {paired(k, 1):.2f} |")
print("(new / this: the median over repetitions of new's median / this one's, in the same repetition)")
PYEOF

if [ -n "$STRACE_DIR" ]; then
  mkdir -p "$STRACE_DIR"
  command -v strace > /dev/null || fail "--strace needs strace"
  # trainlet-pmix under strace: a wrapper in its place (the step starts the file beside itself).
  printf '#!/bin/sh\nexec strace -f -tt -o "%s/pmix.$$" "%s/trainlet-pmix.new" "$@"\n' \
    "$STRACE_DIR" "$COPY" > "$COPY/trainlet-pmix.tmp"
  chmod +x "$COPY/trainlet-pmix.tmp"
  mv -f "$COPY/trainlet-pmix.tmp" "$COPY/trainlet-pmix"
  tracers=()
  for pid in "${EXTRA_PIDS[@]}"; do  # the coordinator and the agents start_netns_cluster started
    strace -f -tt -p "$pid" -o "$STRACE_DIR/$(cat "/proc/$pid/comm").$pid" 2> /dev/null &
    tracers+=($!)
  done
  sleep 1
  run_job traced /bin/sh -c "exec strace -f -tt -o $STRACE_DIR/rank.\$\$ $COPY/fence-timing"
  for t in "${tracers[@]}"; do kill -INT "$t" 2> /dev/null || true; done
  for t in "${tracers[@]}"; do wait "$t" 2> /dev/null || true; done
  use_pmix new
  cp "$WORK/traced.out" "$STRACE_DIR/"
  echo "strace files in $STRACE_DIR: $(ls "$STRACE_DIR" | tr '\n' ' ')"
fi
