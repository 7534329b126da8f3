#!/usr/bin/env bash
# Burst's lint: clang-tidy 14 with the checks of .clang-tidy over every
# source file of the libraries without libtorch and their tests (and the
# headers they include from src/), from a compile database of their own
# (build-tidy/: clang, no precompiled headers, nothing built).
#
# Each library and test binary is one translation unit here (a unity batch
# of all its files, as BURST_UNITY compiles them in batches of 8): clang
# parses and matches the shared headers (JSON, GoogleTest, httplib) once per
# binary instead of once per file, which makes the whole tree a few minutes
# on 2 cores instead of about twelve. Findings in the .cpp files a batch
# includes are reported as in any header of src/. Files that never join a
# batch (the route files, the BPE tokenizer) are checked on their own.
# The engine's files (libtorch) are left out: clang would parse libtorch's
# headers for each, minutes per file on 2 cores.
#   scripts/tidy.sh [FILE...]   the named files only (paths under src/),
#                               each on its own
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
TIDY=${CLANG_TIDY:-clang-tidy-14}
RUN_TIDY=${RUN_CLANG_TIDY:-run-clang-tidy-14}
DIR=${TIDY_DIR:-build-tidy}
for tool in "$TIDY" "$RUN_TIDY"; do
  command -v "$tool" >/dev/null 2>&1 || { echo "tidy: $tool is missing (scripts/install-deps.sh installs it)" >&2; exit 1; }
done
unity=ON
[ $# -gt 0 ] && unity=OFF
# The database lives under the checkout, so clang-tidy finds .clang-tidy
# above the batches' files too.
cmake -S . -B "$DIR" -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=Debug -DBURST_TORCH=OFF \
  -DBURST_UNITY=$unity -DCMAKE_UNITY_BUILD_BATCH_SIZE=0 -DCMAKE_DISABLE_PRECOMPILE_HEADERS=ON \
  >"$DIR.configure.log" 2>&1 || { cat "$DIR.configure.log"; exit 1; }
if [ $# -gt 0 ]; then
  files=("$@")
else
  # Every translation unit in the database that is a file of src/ or a
  # batch of them (not a generated file).
  mapfile -t files < <(python3 -c '
import json, sys, os
root = os.path.abspath("src") + "/"
for e in json.load(open(sys.argv[1])):
    f = os.path.abspath(os.path.join(e["directory"], e["file"]))
    if f.startswith(root) or "/Unity/unity_" in f: print(f)
' "$DIR/compile_commands.json" | sort -u)
fi
echo "tidy: ${#files[@]} translation units, $(nproc) at a time"
# Only src/'s own files report (not generated ones under the build folder);
# the batches' own #include of .cpp files is how unity builds work.
"$RUN_TIDY" -clang-tidy-binary "$(command -v "$TIDY")" -p "$DIR" -quiet -j "$(nproc)" \
  -header-filter="^$root/src/.*\.(h|cpp)$" -checks=-bugprone-suspicious-include "${files[@]}" \
  >"$DIR/tidy.log" 2>&1 || { sed 's/\x1b\[[0-9;]*m//g' "$DIR/tidy.log" | grep -E "(warning|error):" | sort -u >&2 || \
  cat "$DIR/tidy.log" >&2; echo "tidy: findings above (the whole output: $DIR/tidy.log)" >&2; exit 1; }
echo "tidy: no findings"
