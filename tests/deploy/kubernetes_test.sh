#!/usr/bin/env bash
# Renders deploy/kubernetes (base, overlays/gpu and overlays/ha) with `kubectl kustomize`, using keys made by
# deploy/kubernetes/make-keys and the trainletctl just built, then validates every object
# offline against the Kubernetes schemas (validator/validate.js) and checks trainlet's own
# expectations (check_rendered.js).
#   kubernetes_test.sh SOURCE_DIR TRAINLETCTL NODE_MODULES_DIR
# KUBECTL may name the kubectl to use (e.g. Debian's 1.20, whose kustomize is v2.0.3).
set -euo pipefail
src="$1"
trainletctl="$2"
export NODE_PATH="$3"
kubectl="${KUBECTL:-kubectl}"
if ! command -v "$kubectl" >/dev/null; then
  echo "FAIL: $kubectl not found; install kubectl (scripts/install-deps installs kubernetes-client)" >&2
  exit 1
fi
"$kubectl" version --client 2>/dev/null | head -2 || true

work="$(mktemp -d "${TMPDIR:-/tmp}/trainlet-k8s-test.XXXXXX")"
trap 'rm -rf "$work"' EXIT
# A copy, so that the keys made here never land in the source tree (and any real keys there are
# neither used nor touched).
cp -r "$src/deploy/kubernetes" "$work/kubernetes"
find "$work/kubernetes/base/keys" -mindepth 1 ! -name .gitignore -exec rm -rf {} +
keys="$work/kubernetes/base/keys"

echo "== make-keys"
TRAINLETCTL="$trainletctl" "$work/kubernetes/make-keys" --operator alice node-a node-b

echo "== render"
"$kubectl" kustomize "$work/kubernetes/base" > "$work/base.yaml"
"$kubectl" kustomize "$work/kubernetes/overlays/gpu" > "$work/gpu.yaml" 2> "$work/gpu.err" || {
  cat "$work/gpu.err" >&2
  exit 1
}
"$kubectl" kustomize "$work/kubernetes/overlays/ha" > "$work/ha.yaml" 2> "$work/ha.err" || {
  cat "$work/ha.err" >&2
  exit 1
}

echo "== validate against the Kubernetes schemas"
node "$src/tests/deploy/validator/validate.js" "$work/base.yaml" "$work/gpu.yaml" "$work/ha.yaml"

echo "== trainlet's expectations"
node "$src/tests/deploy/check_rendered.js" "$src" "$work/base.yaml" "$work/gpu.yaml" "$keys" \
  "$work/ha.yaml"

echo "== make-keys again with one more node keeps the existing keys"
before="$(cat "$keys/agents/node-a.key" "$keys/coordinator.key")"
TRAINLETCTL="$trainletctl" "$work/kubernetes/make-keys" node-a node-c
after="$(cat "$keys/agents/node-a.key" "$keys/coordinator.key")"
[ "$before" = "$after" ] || { echo "FAIL: make-keys replaced an existing key" >&2; exit 1; }
n="$(grep -c . "$keys/agents.allow")"
[ "$n" = 3 ] || { echo "FAIL: agents.allow has $n entries, want 3" >&2; exit 1; }
"$kubectl" kustomize "$work/kubernetes/base" > "$work/base2.yaml"
grep -q "node-c.key:" "$work/base2.yaml" || { echo "FAIL: node-c's key is not in the Secret" >&2; exit 1; }
if TRAINLETCTL="$trainletctl" "$work/kubernetes/make-keys" 'bad/name' 2>/dev/null; then
  echo "FAIL: make-keys accepted a name that cannot be a Secret key" >&2
  exit 1
fi
echo "PASS"
