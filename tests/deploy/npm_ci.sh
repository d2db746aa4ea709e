#!/usr/bin/env bash
# Installs the manifest validator's npm packages, exactly as package-lock.json pins them, into
# DEST/node_modules (a folder of the build tree, never the source tree).
#   npm_ci.sh SOURCE_VALIDATOR_DIR DEST
# Skips the install when DEST already holds this very lock file's install. Fails, never skips,
# when npm or the registry cannot be reached: CI has both, and a test that silently stops
# validating is worse than a red one.
set -euo pipefail
src="$1"
dest="$2"
for tool in node npm; do
  if ! command -v "$tool" >/dev/null; then
    echo "npm_ci: $tool not found on PATH; install nodejs and npm (scripts/install-deps)" >&2
    exit 1
  fi
done
mkdir -p "$dest"
if [ -f "$dest/node_modules/.package-lock.json" ] && cmp -s "$src/package-lock.json" "$dest/package-lock.json"; then
  echo "npm_ci: $dest is up to date"
  exit 0
fi
cp "$src/package.json" "$src/package-lock.json" "$dest/"
cd "$dest"
rm -rf node_modules
# --ignore-scripts: nothing from the registry runs here.
npm ci --no-audit --no-fund --ignore-scripts --loglevel=error
node -e 'require("kubernetes-models/apps/v1/Deployment"); require("yaml")'
echo "npm_ci: installed into $dest/node_modules"
