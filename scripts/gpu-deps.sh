#!/bin/bash
# The engine's build dependencies for a machine without a package manager
# (the GPU machine of scripts/gpu-check.sh): Debian 12's packages of
# nlohmann-json, CLI11, PCRE2, OpenSSL's libcrypto and GoogleTest, downloaded
# with apt-get and unpacked under DIR/root (default .deps, ignored by git,
# about 20 MiB). scripts/gpu-check.sh points CMake at DIR/root/usr.
#
#   scripts/gpu-deps.sh [DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-.deps}
packages=(nlohmann-json3-dev libcli11-dev libpcre2-dev libpcre2-8-0 libutf8proc-dev libutf8proc2 libssl-dev libssl3 libgtest-dev)
rm -rf "$dir"
mkdir -p "$dir/debs" "$dir/root"
# apt-get download writes into the current folder, as the _apt user where it
# can: a world-writable temporary folder keeps it from warning.
tmp=$(mktemp -d)
chmod 777 "$tmp"
(cd "$tmp" && apt-get download "${packages[@]}" >/dev/null)
mv "$tmp"/*.deb "$dir/debs/"
rmdir "$tmp"
for deb in "$dir"/debs/*.deb; do dpkg -x "$deb" "$dir/root"; done
# Only what the build reads: headers, libraries, CMake and pkg-config files.
# (static libcrypto and libssl: the link takes the shared ones)
rm -f "$dir"/root/usr/lib/x86_64-linux-gnu/{libcrypto.a,libssl.a,libpcre2-16*,libpcre2-32*}
rm -rf "$dir/root/usr/share/doc" "$dir/root/usr/share/man" "$dir/root/usr/bin" "$dir/root/usr/share/lintian"
{
  echo "# unpacked by scripts/gpu-deps.sh on $(date -u +%F) from Debian $(cat /etc/debian_version)"
  for deb in "$dir"/debs/*.deb; do basename "$deb"; done
} > "$dir/PACKAGES"
rm -rf "$dir/debs"
echo "$dir: $(du -sh "$dir" | cut -f1) ($(wc -l < "$dir/PACKAGES") lines in $dir/PACKAGES)"
