#!/usr/bin/env bash
# Issue 19, defect 8, through trainletctl: `get trainjobs` comes in pages (--chunk-size, --limit)
# without the jobs' specs, and a TrainJob too large to list (megabytes of args) or a file of too
# many documents is refused at apply, naming the field or the count. The 40,000-job list and the
# large apply beside heartbeats are unit tests (operator_service_test, coordinator_test).
source "$(dirname "$0")/lib.sh"

start_cluster 1 --slots 2

# 1,200 suspended TrainJobs in one file (within the 2,000-document cap of one apply).
python3 - "$WORK/many.yaml" 1200 <<'PY'
import sys
docs = []
for i in range(int(sys.argv[2])):
    docs.append("apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata:\n"
                f"  name: many-{i}\nspec:\n  suspend: true\n  runtimeRef:\n    name: plain\n"
                "  trainer:\n    command: [\"true\"]\n")
open(sys.argv[1], "w").write("---\n".join(docs))
PY
"$CTL" apply -f "$WORK/many.yaml" > /dev/null || fail "apply of 1,200 TrainJobs"
n=$("$CTL" get trainjobs -o name | wc -l)
[ "$n" = 1200 ] || fail "get trainjobs listed $n jobs, not 1200"
n=$("$CTL" get trainjobs -o name --chunk-size 7 | wc -l)
[ "$n" = 1200 ] || fail "get trainjobs --chunk-size 7 listed $n jobs, not 1200"
"$CTL" get trainjobs --limit 5 > "$WORK/limited" 2> "$WORK/limited.err"
[ "$(tail -n +2 "$WORK/limited" | wc -l)" = 5 ] || fail "--limit 5 showed: $(cat "$WORK/limited")"
assert_contains "$(cat "$WORK/limited.err")" "1195 more trainjobs" "--limit's note"
first=$("$CTL" get trainjobs -o name --limit 1)
[ "$first" = "trainjob/many-0" ] || fail "the oldest job first: got $first"
commands() {  # the command of each job in a JobList as JSON, one line per job
  python3 -c 'import json, sys; [print(j.get("command", [])) for j in json.load(sys.stdin)["jobs"]]'
}
[ "$("$CTL" get trainjobs -o json --limit 2 | commands)" = "$(printf '[]\n[]')" ] ||
  fail "a list carried specs: $("$CTL" get trainjobs -o json --limit 2)"
[ "$("$CTL" get trainjobs many-3 -o json | commands)" = "['true']" ] || fail "get NAME lost the spec"
log "1,200 jobs listed in pages, without specs"

# Three megabytes of args: refused at apply, naming the field.
python3 - "$WORK/fat.yaml" <<'PY'
import sys
arg = "x" * (100 << 10)
open(sys.argv[1], "w").write(
    "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata:\n  name: fat\nspec:\n"
    "  runtimeRef:\n    name: plain\n  trainer:\n    command: [\"true\"]\n    args: ["
    + ", ".join(['"' + arg + '"'] * 30) + "]\n")
PY
if "$CTL" apply -f "$WORK/fat.yaml" 2> "$WORK/err"; then fail "3 MB of args accepted"; fi
assert_contains "$(cat "$WORK/err")" "TrainJob/fat: spec.trainer.args: " "args cap"
# One document over the cap of one apply.
python3 - "$WORK/toomany.yaml" 2001 <<'PY'
import sys
docs = []
for i in range(int(sys.argv[2])):
    docs.append("apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata:\n"
                f"  name: over-{i}\nspec:\n  suspend: true\n  runtimeRef:\n    name: plain\n"
                "  trainer:\n    command: [\"true\"]\n")
open(sys.argv[1], "w").write("---\n".join(docs))
PY
if "$CTL" apply -f "$WORK/toomany.yaml" 2> "$WORK/err"; then fail "2,001 documents accepted"; fi
assert_contains "$(cat "$WORK/err")" "2001 documents, more than the 2000" "document cap"
n=$("$CTL" get trainjobs -o name | wc -l)
[ "$n" = 1200 ] || fail "refused files stored something: $n jobs"
"$CTL" get nodes | grep -q "node-1 *Ready" || fail "node-1 not Ready after the applies"
log "oversized TrainJob and file refused, naming the field and the count"
echo "PASS list_bounds_test"
