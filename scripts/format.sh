#!/usr/bin/env bash
# The one C++ style (.clang-format: Google's, 110 columns), by clang-format 14
# (Debian's clang-format-14; scripts/install-deps.sh installs it).
#   scripts/format.sh           rewrite every tracked .cpp/.h file to it
#   scripts/format.sh --check   change nothing; name each file that differs,
#                               with the command that fixes it, and fail
set -euo pipefail
cd "$(dirname "$0")/.."
check=0
case "${1:-}" in
  "") ;;
  --check) check=1 ;;
  *) echo "usage: scripts/format.sh [--check]" >&2; exit 2 ;;
esac
CLANG_FORMAT=${CLANG_FORMAT:-clang-format-14}
if ! command -v "$CLANG_FORMAT" >/dev/null 2>&1; then
  echo "format: $CLANG_FORMAT is missing (scripts/install-deps.sh installs it)" >&2
  exit 1
fi
# Tracked files (and new ones not ignored), outside a git checkout every file.
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files --cached --others --exclude-standard -- '*.cpp' '*.h' | sort -u)
else
  mapfile -t files < <(find src tests bench fuzz -name '*.cpp' -o -name '*.h' | sort)
fi
existing=()
for f in "${files[@]}"; do [ -f "$f" ] && existing+=("$f"); done
if [ "$check" = 0 ]; then
  printf '%s\0' "${existing[@]}" | xargs -0 "$CLANG_FORMAT" -i
  echo "format: ${#existing[@]} files in the style of .clang-format"
  exit 0
fi
# One process for the tree; its findings read "FILE:LINE:COL: error: code
# should be clang-formatted". It failing for any other reason fails too.
rc=0
out=$("$CLANG_FORMAT" --dry-run --Werror "${existing[@]}" 2>&1) || rc=$?
mapfile -t differ < <(printf '%s\n' "$out" |
  sed -n 's/^\([^:]*\):[0-9]*:[0-9]*: error: code should be clang-formatted.*/\1/p' | sort -u)
if [ "$rc" != 0 ] && [ ${#differ[@]} = 0 ]; then
  printf '%s\n' "$out" >&2
  echo "format: $CLANG_FORMAT failed (exit $rc)" >&2
  exit 1
fi
if [ ${#differ[@]} -gt 0 ]; then
  echo "format: ${#differ[@]} file(s) differ from .clang-format's style:" >&2
  printf '  %s\n' "${differ[@]}" >&2
  echo "run \`make format\` (or $CLANG_FORMAT -i FILE) and commit the result" >&2
  exit 1
fi
echo "format: ${#existing[@]} C++ files follow .clang-format"
