#!/bin/bash
# Writes requirements/NAME.lock from requirements/NAME.in (default: test):
# every package, direct or not, at an exact version with the hashes of its
# files, for Linux x86-64 and CPython 3.11 (Debian 12's). uv resolves; it is
# installed into a throwaway venv and never used to install.
#
#   requirements/lock.sh [NAME]
set -euo pipefail
cd "$(dirname "$0")"
name=${1:-test}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
/usr/bin/python3 -m venv "$tmp/uv"
"$tmp/uv/bin/pip" install -q --disable-pip-version-check uv
"$tmp/uv/bin/uv" pip compile "$name.in" --generate-hashes --python-version 3.11 \
  --python-platform x86_64-manylinux_2_28 --no-header -o "$name.lock"
echo "requirements/$name.lock: $(grep -c '==' "$name.lock") packages"
