#!/usr/bin/env bash
# trainlet-pmix is ready promptly on a node where munge is installed but munged is not running
# (a stale /run/munge/munge.socket.2: connecting is refused). libpmix's munge security component
# would retry libmunge's connection for about 2.3 s before every direct-launch attempt's ranks
# could start; trainlet-pmix selects PMIx's native security (agent/pmix/main.cpp), which needs no
# daemon. The stale socket is made in a private mount namespace (a tmpfs over /run), so the
# machine's own /run/munge is never touched. Needs root (unshare --mount).
set -euo pipefail
: "${TRAINLET_BIN:?TRAINLET_BIN must point at the bin directory of the build}"
PMIX="$TRAINLET_BIN/trainlet-pmix"
if [ ! -x "$PMIX" ]; then echo "SKIP: trainlet-pmix was not built (libpmix-dev missing)"; exit 77; fi
if [ "$(id -u)" != 0 ] || ! unshare --mount true 2>/dev/null; then
  echo "SKIP: needs root for a private mount namespace"
  exit 77
fi
WORK=$(mktemp -d /tmp/trainlet-pmix-start.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
printf 'trainlet-pmix-job-map 1\nnspace trainlet.t.1\nnode %s 0\n' "$(hostname)" > "$WORK/map"
mkdir -p "$WORK/work"

# Inside the namespace: a stale munge socket, then trainlet-pmix started as trainlet-step starts
# it; prints the milliseconds until its "ready" line and the stream; stops it by PID.
cat > "$WORK/inner.sh" <<'EOF'
set -euo pipefail
mount -t tmpfs tmpfs /run
mkdir -p /run/munge
python3 -c 'import socket; s = socket.socket(socket.AF_UNIX); s.bind("/run/munge/munge.socket.2"); s.close()'
exec 3< <(env -u PMIX_MCA_psec TRAINLET_PMIX_JOB_MAP="$WORK/map" TRAINLET_JOB=t TRAINLET_ATTEMPT=1 \
  TRAINLET_NODE_RANK=0 TRAINLET_RENDEZVOUS_ENDPOINT="ipc://$WORK/none.sock" \
  TRAINLET_WORK_DIR="$WORK/work" "$PMIX" 2> "$WORK/stderr" & echo "pid $!")
read -r _ pid <&3
t0=$EPOCHREALTIME
stream=""
while IFS= read -r -t 20 line <&3; do
  stream+="$line"$'\n'
  [ "$line" = ready ] && break
done
t1=$EPOCHREALTIME
kill -TERM "$pid" 2>/dev/null || true
for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
kill -9 "$pid" 2>/dev/null || true
awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%d\n", (b - a) * 1000 }'
printf '%s' "$stream"
EOF
out=$(WORK="$WORK" PMIX="$PMIX" unshare --mount --propagation private bash "$WORK/inner.sh")
ms=$(head -1 <<<"$out")
grep -qx ready <<<"$out" || { echo "FAIL: trainlet-pmix never said ready: $out $(cat "$WORK/stderr")"; exit 1; }
grep -qx "env 0 PMIX_SECURITY_MODE=native" <<<"$out" \
  || { echo "FAIL: the rank should be told native security: $out"; exit 1; }
# 2.3 s with libmunge's retries; well under a second without (about 50 ms here).
[ "$ms" -lt 1000 ] || { echo "FAIL: trainlet-pmix took $ms ms to be ready beside a stale munge socket"; exit 1; }
echo "trainlet-pmix ready in $ms ms beside a stale munge socket, ranks on native security"
