#!/usr/bin/env bash
# The deploy/ files checked by the tools that consume them: systemd-analyze verify on both units,
# plistlib on the launchd plist, and the daemons' own config loading on the example configs;
# and docs/config.md documents every key the daemons accept.
set -euo pipefail
: "${TRAINLET_BIN:?}" "${TRAINLET_SOURCE_DIR:?}"
SRC=$TRAINLET_SOURCE_DIR
WORK=$(mktemp -d /tmp/trainlet-deploy.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# --- systemd units -------------------------------------------------------------------------
command -v systemd-analyze >/dev/null || fail "systemd-analyze missing (scripts/install-deps installs systemd)"
for unit in trainlet-agent trainlet-coordinator; do
  f=$SRC/deploy/systemd/$unit.service
  grep -qx "Type=notify" "$f" || fail "$unit: not Type=notify"
  grep -qx "ExecStart=/usr/bin/$unit --config /etc/trainlet/${unit#trainlet-}.yaml" "$f" \
    || fail "$unit: ExecStart must run /usr/bin/$unit with its config"
  grep -q "^WatchdogSec=" "$f" || fail "$unit: no WatchdogSec"
  # verify needs ExecStart's binary to exist: point a copy at the build's binary.
  sed "s#^ExecStart=/usr/bin/$unit#ExecStart=$TRAINLET_BIN/$unit#" "$f" > "$WORK/$unit.service"
done
(cd "$WORK" && systemd-analyze verify ./trainlet-agent.service ./trainlet-coordinator.service) \
  > "$WORK/verify.out" 2>&1 || { cat "$WORK/verify.out"; fail "systemd-analyze verify failed"; }
# verify exits 0 on unknown keys and bad values, printing a warning: any output is a failure.
if [ -s "$WORK/verify.out" ]; then cat "$WORK/verify.out"; fail "systemd-analyze verify warned"; fi
agent=$SRC/deploy/systemd/trainlet-agent.service
grep -qx "KillMode=process" "$agent" || fail "agent: workers must outlive an agent restart"
for k in NoNewPrivileges=yes ProtectSystem=strict ProtectHome=yes PrivateTmp=yes \
         PrivateDevices=yes User=trainlet StateDirectory=trainlet \
         "RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6" SystemCallFilter=@system-service \
         CapabilityBoundingSet= MemoryDenyWriteExecute=yes; do
  grep -qx "$k" "$SRC/deploy/systemd/trainlet-coordinator.service" || fail "coordinator: missing $k"
done
echo "units: verified"

# --- launchd plist -------------------------------------------------------------------------
python3 - "$SRC/deploy/launchd/io.trainlet.agent.plist" <<'PY'
import plistlib, sys
with open(sys.argv[1], "rb") as f:
    p = plistlib.load(f)  # raises on malformed XML or a non-plist document
assert p["Label"] == "io.trainlet.agent", p["Label"]
args = p["ProgramArguments"]
assert args[0].endswith("/trainlet-agent") and "--config" in args, args
assert p["KeepAlive"] is True
assert p["UserName"] and p["StandardOutPath"] and p["StandardErrorPath"]
assert p.get("AbandonProcessGroup") is True, "workers must outlive an agent restart"
print("plist: ok")
PY

# --- example configs load, and every key is documented ----------------------------------------
mkdir -p "$WORK/keys"
for f in coordinator.key coordinator.key.pub agent.key agents.allow operators.allow; do
  : > "$WORK/keys/$f"
done
for d in agent coordinator; do
  sed -e "s#/etc/trainlet/keys#$WORK/keys#" -e "s#/usr/share/trainlet/runtimes#$SRC/deploy/runtimes#" \
    "$SRC/deploy/config/$d.yaml" > "$WORK/$d.yaml"
  "$TRAINLET_BIN/trainlet-$d" --config "$WORK/$d.yaml" --print-config > "$WORK/$d.out" \
    || fail "trainlet-$d refused its example config"
  keys=$(grep -v '^#' "$WORK/$d.out" | cut -d: -f1)
  [ -n "$keys" ] || fail "trainlet-$d --print-config printed no keys"
  # The daemon's section of docs/config.md: from its heading to the next one.
  section=$(awk -v h="## trainlet-$d" '$0==h{on=1;next} /^## /{on=0} on' "$SRC/docs/config.md")
  for k in $keys; do
    grep -q "^| \`$k\` |" <<<"$section" || fail "docs/config.md: trainlet-$d key $k is not documented"
  done
  documented=$(grep -o '^| `[a-z_]*` |' <<<"$section" | tr -d '|` ' | sort)
  [ "$documented" = "$(sort <<<"$keys")" ] || fail "docs/config.md documents keys trainlet-$d lacks"
  echo "trainlet-$d: example config loads; $(wc -w <<<"$keys") keys documented"
done
grep -qx 'heartbeat_ms: 1000' "$WORK/agent.out" || fail "agent: example heartbeat_ms not applied"
# Flags override the file.
"$TRAINLET_BIN/trainlet-agent" --config "$WORK/agent.yaml" --heartbeat-ms 250 --print-config \
  | grep -qx 'heartbeat_ms: 250' || fail "a flag did not override the file"

# --- bad configs are refused, naming the file and key -----------------------------------------
expect_refusal() {  # DAEMON YAML EXPECTED-STDERR
  printf '%s\n' "$2" > "$WORK/bad.yaml"
  set +e
  "$TRAINLET_BIN/trainlet-$1" --config "$WORK/bad.yaml" --print-config > /dev/null 2> "$WORK/err"
  rc=$?
  set -e
  [ $rc -eq 2 ] || fail "trainlet-$1 accepted: $2 (rc $rc)"
  [ "$(cat "$WORK/err")" = "trainlet-$1: $WORK/bad.yaml: $3" ] \
    || fail "trainlet-$1: expected '$3', got '$(cat "$WORK/err")'"
}
expect_refusal agent 'heartbeat_ms: fast' \
  'heartbeat_ms: must be an integer from 50 to 60000, got "fast"'
expect_refusal agent 'hearbeat_ms: 100' \
  'hearbeat_ms: unknown key for trainlet-agent (docs/config.md lists the keys)'
expect_refusal coordinator 'log_target: syslog' \
  'log_target: must be one of auto, stderr, journal, got "syslog"'
expect_refusal coordinator 'metrics_address: localhost' \
  'metrics_address: must be host:port (port 0 to 65535), :port, or "" to turn it off, got "localhost"'
set +e
"$TRAINLET_BIN/trainlet-coordinator" > /dev/null 2> "$WORK/err"
rc=$?
set -e
[ $rc -eq 2 ] && grep -q "state_dir: required" "$WORK/err" || fail "a missing required key was accepted"
echo "configs: refusals name the key"
echo PASS
