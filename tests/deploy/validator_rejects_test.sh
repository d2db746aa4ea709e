#!/usr/bin/env bash
# The validator must refuse each deliberately broken manifest in broken/, with the message its
# first line names ("# expect: ..."). A validator that accepts everything fails here.
#   validator_rejects_test.sh SOURCE_DIR NODE_MODULES_DIR
set -euo pipefail
src="$1"
export NODE_PATH="$2"
validate="$src/tests/deploy/validator/validate.js"
failed=0
count=0
for f in "$src"/tests/deploy/broken/*.yaml; do
  count=$((count + 1))
  want="$(sed -n '1s/^# expect: //p' "$f")"
  if out="$(node "$validate" "$f" 2>&1)"; then
    echo "FAIL: $(basename "$f") was accepted"
    failed=1
  elif ! grep -qF -- "$want" <<<"$out"; then
    echo "FAIL: $(basename "$f"): want \"$want\", got: $out"
    failed=1
  else
    echo "ok: $(basename "$f") refused: $(head -1 <<<"$out")"
  fi
done
[ "$count" -ge 5 ] || { echo "FAIL: only $count broken manifests"; exit 1; }
# And a valid manifest passes, so the refusals above are not an always-failing validator.
cat > "${TMPDIR:-/tmp}/trainlet-valid-$$.yaml" <<'YAML'
apiVersion: v1
kind: ConfigMap
metadata:
  name: fine
data:
  a: b
YAML
trap 'rm -f "${TMPDIR:-/tmp}/trainlet-valid-$$.yaml"' EXIT
node "$validate" "${TMPDIR:-/tmp}/trainlet-valid-$$.yaml" || { echo "FAIL: a valid ConfigMap was refused"; failed=1; }
exit "$failed"
