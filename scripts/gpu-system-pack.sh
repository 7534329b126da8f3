#!/bin/bash
# Packs Burst for the GPU check's system stage (scripts/gpu-system-check.sh):
# the `burst` and `burst-engine` binaries of a build here, stripped, and
# every shared library they need besides libtorch's (the GPU machine has
# PyTorch's own, of the same release) and glibc's, as DIR/pack.tar.xz
# (default DIR .gpu-system, ignored by git; about 19 MiB, which the device
# tool carries beside the tree, 64 MiB at most in all).
#
#   scripts/gpu-system-pack.sh [BUILD_DIR] [DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
dir=${2:-.gpu-system}
bin=$build/src
[ -x "$bin/burst" ] && [ -x "$bin/burst-engine" ] ||
  { echo "gpu-system-pack.sh: no burst and burst-engine under $bin (build them first)" >&2; exit 1; }
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/pack/lib"
strip -o "$stage/pack/burst" "$bin/burst"
strip -o "$stage/pack/burst-engine" "$bin/burst-engine"
# What the loader resolves here, less PyTorch's (torch/lib, nvidia/*) and
# the C and C++ runtimes, which the GPU machine has (newer).
ldd "$bin/burst" "$bin/burst-engine" | awk '$3 ~ /^\// {print $3}' | sort -u | while read -r lib; do
  case "$lib" in
    */site-packages/torch/* | */site-packages/nvidia/* | */libc.so.* | */libm.so.* | */libdl.so.* | \
      */libpthread.so.* | */librt.so.* | */ld-linux*.so* | */libstdc++.so.* | */libgcc_s.so.*) ;;
    *) cp -L "$lib" "$stage/pack/lib/" ;;
  esac
done
{
  echo "packed $(date -u +%FT%TZ) from commit $(git rev-parse --short HEAD) ($bin), torch $(
    .venv/bin/python -c 'import torch; print(torch.__version__)' 2>/dev/null || echo '?')"
  ls "$stage/pack/lib" | tr '\n' ' '
  echo
} > "$stage/pack/PACKED"
rm -rf "$dir"
mkdir -p "$dir"
tar -cJf "$dir/pack.tar.xz" -C "$stage" pack
cp "$stage/pack/PACKED" "$dir/PACKED"
echo "$dir/pack.tar.xz: $(du -h "$dir/pack.tar.xz" | cut -f1) ($(ls "$stage/pack/lib" | wc -l) libraries)"
