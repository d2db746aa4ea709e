#!/usr/bin/env bash
# Builds the .deb with cpack from a finished build tree, installs it on this machine with
# `dpkg -i`, checks what it installed, installs it again (postinst must be idempotent), purges
# it, and checks that everything is gone but the `trainlet` user, which postrm keeps on purpose.
#   deb_test.sh SOURCE_DIR BUILD_DIR
# Needs root and dpkg; exits 77 (skipped) without them. Refuses (fails) to touch a machine where
# trainlet is installed by someone else. Restores the machine on every exit, and takes a lock so
# two runs never overlap.
set -euo pipefail
src="$1"
build="$2"

if [ "$(id -u)" != 0 ]; then echo "SKIP: needs root for dpkg -i"; exit 77; fi
if ! command -v dpkg >/dev/null || ! command -v cpack >/dev/null; then
  echo "SKIP: needs dpkg and cpack"
  exit 77
fi

exec 9>/run/lock/trainlet-deb-test.lock
flock -w 900 9 || { echo "FAIL: another deb test holds /run/lock/trainlet-deb-test.lock"; exit 1; }

# This test's own mark on the machine: with it, a leftover of an earlier, killed run is ours.
marker=/var/lib/trainlet-deb-test.owner
installed() { dpkg-query -W -f='${Status}' trainlet 2>/dev/null | grep -q "ok installed\|config-files"; }
if installed; then
  if [ -e "$marker" ]; then
    echo "purging the leftover of an earlier run"
    dpkg --purge trainlet >/dev/null
  else
    echo "FAIL: a trainlet package is installed on this machine; refusing to replace it"
    exit 1
  fi
fi
for p in /etc/trainlet /var/lib/trainlet /var/lib/trainlet-agent; do
  if [ -e "$p" ] && [ ! -e "$marker" ]; then
    echo "FAIL: $p exists and the package's purge would delete it; refusing"
    exit 1
  fi
done
user_existed=0
if getent passwd trainlet >/dev/null && [ ! -e "$marker" ]; then user_existed=1; fi
if [ -e "$marker" ]; then user_existed="$(cat "$marker")"; fi
echo "$user_existed" > "$marker"

work="$(mktemp -d "${TMPDIR:-/tmp}/trainlet-deb-test.XXXXXX")"
cleanup() {
  local rc=$?
  if installed; then dpkg --purge trainlet >/dev/null 2>&1 || true; fi
  # None of these existed before the test (checked above), so whatever is left is this test's,
  # left by a failing package.
  rm -rf /etc/trainlet /var/lib/trainlet /var/lib/trainlet-agent
  if [ "$user_existed" = 0 ] && getent passwd trainlet >/dev/null; then
    deluser --system --quiet trainlet >/dev/null 2>&1 || true
  fi
  if [ "$user_existed" = 0 ] && getent group trainlet >/dev/null; then
    delgroup --system --quiet trainlet >/dev/null 2>&1 || true
  fi
  if [ -n "${cluster:-}" ] && [ -x /usr/bin/trainletctl ]; then
    /usr/bin/trainletctl local down --dir "$cluster" >/dev/null 2>&1 || true
  fi
  rm -rf "$work"
  rm -f "$marker"
  exit "$rc"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }

echo "== cpack -G DEB"
(cd "$build" && cpack -G DEB -B "$work/pkg" > "$work/cpack.log" 2>&1) || { cat "$work/cpack.log"; fail "cpack"; }
deb="$(ls "$work"/pkg/trainlet_*.deb)"
echo "built $(basename "$deb")"
dpkg-deb -I "$deb" > "$work/info"
depends="$(sed -n 's/^ Depends: //p' "$work/info")"
echo "Depends: $depends"
for d in adduser libsystemd0 libzmq5 libhwloc15 libprotobuf libsqlite3-0 libyaml-cpp; do
  grep -q "$d" <<<"$depends" || fail "Depends lacks $d (shlibdeps)"
done
dpkg-deb --ctrl-tarfile "$deb" | tar -t > "$work/control-files"
for f in postinst prerm postrm; do grep -qx "./$f" "$work/control-files" || fail "no $f in the package"; done

# What the package must hold: binaries, runtimes, and whatever units and configs deploy/ has.
expect=(/usr/bin/trainletctl /usr/bin/trainlet-agent /usr/bin/trainlet-coordinator /usr/bin/trainlet-initializer)
[ -d "$src/cli/trainlet-exec" ] && expect+=(/usr/bin/trainlet-exec)
for f in "$src"/deploy/runtimes/*.yaml; do expect+=("/usr/share/trainlet/runtimes/$(basename "$f")"); done
# The Python SDK and the protobuf modules the build generated for it (python/CMakeLists.txt).
sdk=/usr/lib/python3/dist-packages/trainlet
expect+=("$sdk/__init__.py" "$sdk/client.py" "$sdk/v1/envelope_pb2.py" "$sdk/v1/operator_pb2.py")
units=()
for f in "$src"/deploy/systemd/*.service; do
  [ -e "$f" ] && { units+=("$(basename "$f")"); expect+=("/lib/systemd/system/$(basename "$f")"); }
done
configs=()
for f in "$src"/deploy/config/*.yaml; do
  [ -e "$f" ] && { configs+=("/etc/trainlet/$(basename "$f")"); expect+=("/etc/trainlet/$(basename "$f")"); }
done
if [ ${#configs[@]} -gt 0 ]; then
  dpkg-deb --ctrl-tarfile "$deb" | tar -xO ./conffiles > "$work/conffiles"
  for c in "${configs[@]}"; do grep -qx "$c" "$work/conffiles" || fail "$c is not a conffile"; done
fi

echo "== dpkg -i"
dpkg -i "$deb" > "$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log"; fail "dpkg -i"; }
for f in "${expect[@]}"; do [ -e "$f" ] || fail "$f not installed"; done
/usr/bin/trainlet-agent --version | grep -qx "trainlet-agent [0-9.]*" || fail "trainlet-agent --version"
/usr/bin/trainlet-coordinator --version | grep -q "^trainlet-coordinator " || fail "coordinator --version"
trainletctl_version="$(/usr/bin/trainletctl --version)"
echo "installed: $trainletctl_version"
[[ "$trainletctl_version" == "trainletctl "* ]] || fail "trainletctl --version"
getent passwd trainlet > "$work/passwd" || fail "no trainlet user"
IFS=: read -r _ _ uid _ _ home shell < "$work/passwd"
[ "$uid" -lt 1000 ] || fail "trainlet is not a system user (uid $uid)"
[ "$home" = /var/lib/trainlet ] || fail "trainlet's home is $home"
[ "$shell" = /usr/sbin/nologin ] || fail "trainlet's shell is $shell"
[ "$(stat -c %U:%G:%a /var/lib/trainlet)" = trainlet:trainlet:750 ] || fail "/var/lib/trainlet: $(stat -c %U:%G:%a /var/lib/trainlet)"
[ "$(stat -c %U:%G:%a /etc/trainlet/keys)" = root:trainlet:750 ] || fail "/etc/trainlet/keys: $(stat -c %U:%G:%a /etc/trainlet/keys)"

echo "== the installed binaries run a job (runtimes found via /usr/share/trainlet)"
cluster="$work/cluster"
/usr/bin/trainletctl local up --agents 1 --slots 2 --dir "$cluster" > "$work/up.log" 2>&1 || { cat "$work/up.log"; fail "local up"; }
cat > "$work/job.yaml" <<'YAML'
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: deb-smoke
spec:
  runtimeRef:
    name: plain
  trainer:
    numNodes: 1
    command: ["/bin/true"]
YAML
read -r cpid _ < "$cluster/pids/coordinator.pid"
tr '\0' ' ' < "/proc/$cpid/cmdline" | grep -q -- "--runtimes-dir /usr/share/trainlet/runtimes" \
  || fail "the installed trainletctl did not find /usr/share/trainlet/runtimes: $(tr '\0' ' ' < "/proc/$cpid/cmdline")"
/usr/bin/trainletctl --home "$cluster" apply -f "$work/job.yaml" >/dev/null || fail "apply"
/usr/bin/trainletctl --home "$cluster" wait trainjob/deb-smoke --for=condition=Complete --timeout=60s \
  || fail "the job did not complete"
echo "== the installed Python SDK reads the job (TRAINLET_HOME, as trainletctl)"
sdk_status="$(cd / && env -u PYTHONPATH -u TRAINLET_PROTO_DIR TRAINLET_HOME="$cluster" /usr/bin/python3 -c '
import trainlet
assert trainlet.__file__.startswith("/usr/lib/python3/dist-packages/trainlet/"), trainlet.__file__
print(trainlet.TrainerClient().get_job("deb-smoke").status)')" || fail "the installed SDK failed"
[ "$sdk_status" = Complete ] || fail "the installed SDK says deb-smoke is $sdk_status"
/usr/bin/trainletctl local down --dir "$cluster" >/dev/null 2>&1
cluster=""

echo "== dpkg -i again (upgrade path, postinst is idempotent)"
dpkg -i "$deb" > "$work/dpkg2.log" 2>&1 || { cat "$work/dpkg2.log"; fail "second dpkg -i"; }

# What the agent's unit would have made (StateDirectory=), so that purge is seen to remove it.
install -d -m 0750 /var/lib/trainlet-agent
touch /var/lib/trainlet-agent/worker.log /var/lib/trainlet/store.db

echo "== dpkg --purge"
dpkg --purge trainlet > "$work/purge.log" 2>&1 || { cat "$work/purge.log"; fail "dpkg --purge"; }
installed && fail "still installed after purge"
for f in "${expect[@]}" /usr/share/trainlet /etc/trainlet /var/lib/trainlet /var/lib/trainlet-agent "$sdk"; do
  [ -e "$f" ] && fail "$f is left after purge"
done
# Documented in packaging/debian/postrm: the system user survives a purge.
getent passwd trainlet >/dev/null || fail "postrm documents that the trainlet user is kept, but it is gone"
echo "PASS (units: ${units[*]:-none yet}; configs: ${configs[*]:-none yet})"
