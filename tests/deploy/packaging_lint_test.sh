#!/usr/bin/env bash
# Lints what cannot be built here: the container recipe and the Homebrew formula, plus the
# .deb's maintainer scripts.
#   packaging_lint_test.sh SOURCE_DIR
#  - packaging/Dockerfile: every COPY source exists, every COPY --from names an earlier stage,
#    and the files it copies are enough to configure the project with the Dockerfile's own
#    cmake flags (so a new top-level folder the build needs cannot be forgotten).
#  - packaging/homebrew/trainlet.rb: `ruby -c` where ruby exists (skipped, with a note, where it
#    does not), and the dependencies and service block the formula must have.
#  - packaging/debian/*: sh -n, and shellcheck where it exists.
set -euo pipefail
src="$1"
dockerfile="$src/packaging/Dockerfile"
formula="$src/packaging/homebrew/trainlet.rb"
failed=0
fail() { echo "FAIL: $*"; failed=1; }
work="$(mktemp -d "${TMPDIR:-/tmp}/trainlet-pkg-lint.XXXXXX")"
trap 'rm -rf "$work"' EXIT

echo "== Dockerfile"
stages=()
copied=()
while read -r instr rest; do
  case "${instr^^}" in
    FROM)
      # FROM image [AS name]
      read -r _image as name <<<"$rest"
      [ "${as^^}" = AS ] && stages+=("$name")
      ;;
    COPY)
      read -ra args <<<"$rest"
      from=""
      files=()
      for a in "${args[@]}"; do
        case "$a" in
          --from=*) from="${a#--from=}" ;;
          --*) ;;
          *) files+=("$a") ;;
        esac
      done
      [ ${#files[@]} -ge 2 ] || { fail "COPY $rest: needs a source and a destination"; continue; }
      unset 'files[${#files[@]}-1]'
      if [ -n "$from" ]; then
        printf '%s\n' "${stages[@]}" | grep -qx "$from" || fail "COPY --from=$from: no such stage"
      else
        for f in "${files[@]}"; do
          if [ -e "$src/$f" ]; then copied+=("$f"); else fail "COPY $f: not in the repository"; fi
        done
      fi
      ;;
  esac
done < <(grep -E '^(FROM|COPY) ' "$dockerfile")
[ ${#stages[@]} -ge 1 ] || fail "no named build stage"
[ ${#copied[@]} -ge 5 ] || fail "only ${#copied[@]} COPY sources found"

flags="$(grep -A1 '^# trainlet-configure' "$dockerfile" | sed -n 's/^RUN cmake -S \. -B [^ ]* //p')"
[ -n "$flags" ] || fail "no 'RUN cmake -S . -B DIR FLAGS' line after '# trainlet-configure'"
mkdir -p "$work/ctx"
for f in "${copied[@]}"; do
  mkdir -p "$work/ctx/$(dirname "$f")"
  cp -r "$src/$f" "$work/ctx/$f"
done
# shellcheck disable=SC2086  # the flags are words
if ! cmake -S "$work/ctx" -B "$work/build" $flags > "$work/cmake.log" 2>&1; then
  tail -20 "$work/cmake.log"
  fail "the Dockerfile's COPY set does not configure"
else
  echo "ok: the COPY set configures with: $flags"
fi
for pattern in 'build\*/' 'deploy/kubernetes/base/keys/'; do
  grep -q "^$pattern" "$src/packaging/Dockerfile.dockerignore" || fail "Dockerfile.dockerignore lacks $pattern"
done

echo "== Homebrew formula"
if command -v ruby >/dev/null; then
  ruby -c "$formula" || fail "ruby -c $formula"
else
  echo "note: ruby not found, syntax check of $formula skipped"
fi
grep -q '^class Trainlet < Formula$' "$formula" || fail "formula class must be Trainlet < Formula"
for dep in cmake hwloc zeromq cppzmq protobuf spdlog yaml-cpp cli11 sqlite nlohmann-json; do
  grep -qE "^  depends_on \"$dep\"" "$formula" || fail "formula lacks depends_on \"$dep\""
done
grep -q '^  service do$' "$formula" || fail "formula has no service block"
grep -qE '^  sha256 "[0-9a-f]{64}"$' "$formula" || fail "formula sha256 is not 64 hex digits"
grep -q 'trainlet-agent' "$formula" || fail "formula's service does not run trainlet-agent"

echo "== maintainer scripts"
for f in "$src"/packaging/debian/postinst "$src"/packaging/debian/prerm "$src"/packaging/debian/postrm; do
  sh -n "$f" || fail "sh -n $f"
  [ -x "$f" ] || fail "$f is not executable"
done
if command -v shellcheck >/dev/null; then
  shellcheck -s sh "$src"/packaging/debian/postinst "$src"/packaging/debian/prerm "$src"/packaging/debian/postrm \
    || fail "shellcheck"
else
  echo "note: shellcheck not found, skipped"
fi

[ "$failed" = 0 ] && echo PASS
exit "$failed"
