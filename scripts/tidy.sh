#!/usr/bin/env bash
# Burst's lint: clang-tidy 14 with the checks of .clang-tidy over every
# source file of the libraries without libtorch (and the headers they
# include from src/), from a compile database of their own (build-tidy/:
# clang, one file per compile, no precompiled headers, nothing built).
# The engine's files (libtorch) are left out: clang would parse libtorch's
# headers for each, minutes per file on 2 cores.
#   scripts/tidy.sh [FILE...]   the named files only (paths under src/)
set -euo pipefail
cd "$(dirname "$0")/.."
TIDY=${CLANG_TIDY:-clang-tidy-14}
RUN_TIDY=${RUN_CLANG_TIDY:-run-clang-tidy-14}
DIR=${TIDY_DIR:-build-tidy}
for tool in "$TIDY" "$RUN_TIDY"; do
  command -v "$tool" >/dev/null 2>&1 || { echo "tidy: $tool is missing (scripts/install-deps.sh installs it)" >&2; exit 1; }
done
cmake -S . -B "$DIR" -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=Debug -DBURST_TORCH=OFF -DBURST_UNITY=OFF \
  -DCMAKE_DISABLE_PRECOMPILE_HEADERS=ON >"$DIR.configure.log" 2>&1 || { cat "$DIR.configure.log"; exit 1; }
if [ $# -gt 0 ]; then
  files=("$@")
else
  # Every source file in the database under src/ (tests and fuzz targets
  # too), not generated ones.
  mapfile -t files < <(python3 -c '
import json, sys, os
root = os.path.abspath("src") + "/"
for e in json.load(open(sys.argv[1])):
    f = os.path.abspath(os.path.join(e["directory"], e["file"]))
    if f.startswith(root): print(f)
' "$DIR/compile_commands.json" | sort -u)
fi
echo "tidy: ${#files[@]} files, $(nproc) at a time"
"$RUN_TIDY" -clang-tidy-binary "$(command -v "$TIDY")" -p "$DIR" -quiet -j "$(nproc)" "${files[@]}" \
  >"$DIR/tidy.log" 2>&1 || { grep -E "(warning|error):" "$DIR/tidy.log" | sort -u >&2 || cat "$DIR/tidy.log" >&2; \
  echo "tidy: findings above (the whole output: $DIR/tidy.log)" >&2; exit 1; }
echo "tidy: no findings"
