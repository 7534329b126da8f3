#!/usr/bin/env bash
# Installs what Burst builds and tests with, when missing: Debian's packages,
# then the project's Python (.venv) from requirements/test.lock, exact
# versions with their hashes: PyPI's torch (libtorch for the engine, with its
# CUDA runtime), and the libraries the tests judge Burst by. Idempotent,
# quiet when everything is there, offline once installed. Run as root (or
# with sudo) for the Debian part. With --bench, also the benchmarks' peers
# (requirements/bench.lock: test.lock's packages at the same versions, and
# TRL). With --run, only what building the two binaries and running the
# demo need (`make run`): no test servers (PostgreSQL, Slurm, Ceph), browser
# or sanitizer toolchain. With --system, Debian's packages only (`make test`
# lints while the venv downloads).
set -euo pipefail
bench=0
run_only=0
system_only=0
for arg in "$@"; do
  case "$arg" in
    --bench) bench=1 ;;
    --run) run_only=1 ;;
    --system) system_only=1 ;;
    *) echo "usage: scripts/install-deps.sh [--run] [--bench] [--system]" >&2; exit 2 ;;
  esac
done
cd "$(dirname "$0")/.."

# What `make run` needs: the two binaries' build and the demo.
packages=(
  cmake g++ make pkg-config git
  libgloo-dev                           # the headers of libtorch's c10d Gloo collectives (one job on many workers)
  python3-venv                          # the project's .venv (below)
  libpcre2-dev                          # tokenizer.json pre-tokenizer regexes
  libutf8proc-dev                       # tokenizer.json's NFC normalizer
  libonig-dev                           # Oniguruma: the pre-tokenizer patterns checked against it (bpe_onig_test)
  nlohmann-json3-dev libcli11-dev        # JSON, command line
  libssl-dev                            # sha256 (libcrypto)
  libsqlite3-dev                        # metadata database (control plane)
  libpq-dev                             # metadata on PostgreSQL: libpq
  libcpp-httplib-dev                    # HTTP server and client (control plane, workers)
  libcurl4-openssl-dev                  # the s3:// object store's HTTP client
  libarchive-dev                        # checkpoint downloads as tar (server and CLI)
  libgtest-dev                          # tests (the build configures them)
)
# ... and what the tests and benchmarks add (`make test`, `make bench`).
if [ "$run_only" = 0 ]; then
  packages+=(
    libopenblas-dev                       # OpenBLAS: the BLAS benchmark's other side (libtorch brings its MKL)
    postgresql-15                         # a real PostgreSQL server for the metadata tests (tests/pg/)
    clang libclang-rt-14-dev              # libFuzzer + sanitizer runtimes (make fuzz)
    clang-format-14 clang-tidy-14         # the one C++ format (make format) and the lint (make tidy)
    sentencepiece                         # spm_train: tokenizer fixtures and the base model's tokenizer
    slurmctld slurmd slurm-client munge   # a real Slurm for the Slurm executor's tests (tests/slurm/)
    slurmrestd slurm-wlm-jwt-plugin       # ... and its REST API with JWT authentication (--slurm-rest)
    ceph-mon ceph-osd ceph-mgr radosgw curl  # a real S3 (radosgw) for the s3:// store's tests (tests/s3/)
    chromium fonts-dejavu-core            # a real browser for the dashboard's test (tests/reference/dashboard_flow.mjs)
  )
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
# Node.js + npm run the Hugging Face reference tokenizer in tests.
if ! command -v npm >/dev/null 2>&1; then missing+=(nodejs npm); fi

if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

[ "$system_only" = 1 ] && exit 0

# The project's Python. A venv whose stamp names the lock's hash is current;
# any other is made again from the lock (pip's cache keeps that quick).
venv=.venv
lock=requirements/test.lock
want=$(sha256sum "$lock" | cut -d' ' -f1)
if [ "$(cat "$venv/.lock-sha256" 2>/dev/null)" != "$want" ]; then
  echo "installing $lock into $venv (PyPI's torch and its CUDA runtime: about 3 GB the first time)"
  rm -rf "$venv"
  /usr/bin/python3 -m venv "$venv"
  # --no-compile: Python compiles what is imported, when first imported,
  # instead of every module of torch now (a minute of CPU on 2 cores).
  "$venv/bin/pip" install -q --disable-pip-version-check --no-input --require-hashes --only-binary :all: \
    --no-compile -r "$lock"
  echo "$want" > "$venv/.lock-sha256"
fi
# The tinker SDK's first release Burst spoke, beside the newest (the tests
# drive both): its own folder, put first on PYTHONPATH by those tests.
old_tinker=requirements/tinker-0.25.0.lock
want_old=$(sha256sum "$old_tinker" | cut -d' ' -f1)
if [ "$(cat "$venv/tinker-0.25.0/.lock-sha256" 2>/dev/null)" != "$want_old" ]; then
  rm -rf "$venv/tinker-0.25.0"
  "$venv/bin/pip" install -q --disable-pip-version-check --no-input --require-hashes --only-binary :all: \
    --no-compile --no-deps --target "$venv/tinker-0.25.0" -r "$old_tinker"
  echo "$want_old" > "$venv/tinker-0.25.0/.lock-sha256"
fi
# A lock that only adds packages to the venv (it resolves against test.lock,
# so the tests' stamp stays true), installed unless its stamp names its hash:
#   add_lock LOCK STAMP WHAT [pip options]
add_lock() {
  local lock=$1 stamp=$venv/$2 what=$3 want
  shift 3
  want=$(sha256sum "$lock" | cut -d' ' -f1)
  [ "$(cat "$stamp" 2>/dev/null)" = "$want" ] && return 0
  echo "installing $lock into $venv ($what)"
  "$venv/bin/pip" install -q --disable-pip-version-check --no-input --require-hashes --only-binary :all: \
    --no-compile "$@" -r "$lock"
  echo "$want" > "$stamp"
}
# The Tinker cookbook (its supervised and RL loops, run against Burst by the
# tests and `make cookbook`): its lock holds every package it needs, so
# --no-deps: the lock leaves out a requirement PyPI here cannot serve
# (requirements/cookbook.overrides).
[ "$run_only" = 1 ] || add_lock requirements/cookbook.lock .cookbook-lock-sha256 "the Tinker cookbook" --no-deps
# The benchmarks' peers.
[ "$bench" = 0 ] || add_lock requirements/bench.lock .bench-lock-sha256 "the benchmarks' peers"
