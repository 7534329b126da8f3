#!/bin/bash
# Writes requirements/NAME.lock from requirements/NAME.in (default: test):
# every package, direct or not, at an exact version with the hashes of its
# files, for Linux x86-64 and CPython 3.11 (Debian 12's). uv resolves; it is
# installed into a throwaway venv and never used to install. Any other lock
# than test's resolves against test.lock's versions, so that installing it
# over the tests' .venv only adds packages. NAME.overrides, where there is
# one, goes to uv as --override (a requirement a package declares but that
# this machine's index cannot serve).
#
#   requirements/lock.sh [NAME]
set -euo pipefail
cd "$(dirname "$0")"
name=${1:-test}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
/usr/bin/python3 -m venv "$tmp/uv"
"$tmp/uv/bin/pip" install -q --disable-pip-version-check uv
constraints=()
[ -f "$name.overrides" ] && constraints+=(--override "$name.overrides")
if [ "$name" != test ]; then
  grep -E '^[a-z0-9]' test.lock | sed 's/ .*//' > "$tmp/test-pins.txt"
  constraints+=(-c "$tmp/test-pins.txt")
fi
"$tmp/uv/bin/uv" pip compile "$name.in" "${constraints[@]}" --generate-hashes --python-version 3.11 \
  --python-platform x86_64-manylinux_2_28 --no-header -o "$name.lock"
sed -i "s#$tmp/test-pins.txt#test.lock#" "$name.lock"
echo "requirements/$name.lock: $(grep -c '==' "$name.lock") packages"
