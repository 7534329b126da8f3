#!/usr/bin/env bash
# Installs the npm packages of one folder of the tree:
#   scripts/install-npm-deps.sh            tests/reference: the reference
#       implementations and clients the tests compare against and drive
#   scripts/install-npm-deps.sh web        web: what the dashboard is built
#       from (uPlot), embedded into the binary at build time
#
# Idempotent: does nothing when DIR/node_modules was installed from the
# current package-lock.json (a changed lock reinstalls).
# Quiet on success; on failure npm's log is printed to stderr and the exit
# status is non-zero (the tests then skip with a message).
set -euo pipefail

ref_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/${1:-tests/reference}"
# Another process (a parallel test) may be installing at the same moment; a
# lock outside the tree keeps the two from writing node_modules together, and
# node_modules is only looked at under it.
exec 9>"${TMPDIR:-/tmp}/burst-install-npm-deps.$(basename "${ref_dir}").lock"
flock 9
lock_sha="$(sha256sum "${ref_dir}/package-lock.json" | cut -d' ' -f1)"
if [[ -d "${ref_dir}/node_modules" && "$(cat "${ref_dir}/node_modules/.burst-lock-sha256" 2>/dev/null)" == "${lock_sha}" ]]; then
  exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
  echo "install-npm-deps.sh: npm not found; install Node.js 18+ (${ref_dir})" >&2
  exit 1
fi

# Whatever is there is stale: the marker goes first, so a test that finds
# the folder before this install ends knows it is not ready.
rm -f "${ref_dir}/node_modules/.burst-lock-sha256"
log="$(mktemp)"
trap 'rm -f "${log}"' EXIT
# --omit=optional: node-llama-cpp's prebuilt llama.cpp for every platform
# and GPU (700 MB) is optional; tests/reference names the CPU linux-x64 one
# itself. --ignore-scripts: no package here needs one, and node-llama-cpp's
# would fetch or build llama.cpp.
# With a lock, 'npm install --no-save' rather than 'npm ci': the registry
# this project reaches holds no mac/win builds of node-llama-cpp, so the lock
# cannot name them, and npm ci refuses a lock without every optional package
# even when told to omit optional ones. The install is then checked against
# the lock below, so it is as exact as npm ci.
if [[ -f "${ref_dir}/package-lock.json" ]]; then
  cmd=(npm install --no-save --omit=optional --ignore-scripts)
else
  cmd=(npm install --omit=optional --ignore-scripts)
fi
if ! "${cmd[@]}" --prefix "${ref_dir}" --no-audit --no-fund --loglevel=error >"${log}" 2>&1; then
  echo "install-npm-deps.sh: '${cmd[*]} --prefix ${ref_dir}' failed:" >&2
  cat "${log}" >&2
  rm -rf "${ref_dir}/node_modules"
  exit 1
fi
# Every package the lock names (optional ones where npm installed them) must
# be there at the locked version.
if [[ -f "${ref_dir}/package-lock.json" ]] && ! node - "${ref_dir}" <<'JS'
const fs = require('fs'), path = require('path');
const dir = process.argv[2];
const lock = JSON.parse(fs.readFileSync(path.join(dir, 'package-lock.json'), 'utf8'));
let bad = 0;
for (const [key, entry] of Object.entries(lock.packages || {})) {
  if (!key || entry.link) continue;
  const file = path.join(dir, key, 'package.json');
  if (!fs.existsSync(file)) {
    if (!entry.optional && !entry.dev) { console.error(`missing: ${key}@${entry.version}`); bad++; }
    continue;
  }
  const got = JSON.parse(fs.readFileSync(file, 'utf8')).version;
  if (got !== entry.version) { console.error(`${key}: installed ${got}, locked ${entry.version}`); bad++; }
}
process.exit(bad ? 1 : 0);
JS
then
  echo "install-npm-deps.sh: ${ref_dir}/node_modules does not match package-lock.json (above)" >&2
  rm -rf "${ref_dir}/node_modules"
  exit 1
fi
echo "${lock_sha}" >"${ref_dir}/node_modules/.burst-lock-sha256"
