#!/bin/bash
# The GPU check (docs/bench.md, "GPU"): builds Burst's engine against the
# machine's PyTorch, proves it right on CUDA and measures it against Hugging
# Face + PEFT on the same GPU, in one run that fits a few minutes of a lent
# machine.
#
#   scripts/gpu-deps.sh               # here, once: the unpacked dependencies (.deps)
#   scripts/gpu-check.sh OUT_DIR      # there (the device tool carries .deps)
#
# Stages, each time-boxed and each recorded whether it passes or fails (one
# failing stage never stops the next): the machine's facts against what is
# planned for; the build (engine targets only, ninja); parity (CUDA float32
# and bfloat16 against the CPU, Burst against transformers + PEFT); LoRA
# training speed and peak memory on Llama-3.2-1B and Llama-3.1-8B shapes
# against transformers + PEFT, with MFU against the bf16 matrix rate
# measured in the run; the 8B shape at 4,096 tokens with activation
# checkpointing; a short run and its resume (bit-exact or not, with
# deterministic kernels and without); sampling speed against generate().
# OUT_DIR gets report.md, results.jsonl (the raw JSON lines), facts.json
# and log.txt. The whole of Burst on the GPU (serve, jobs, a SIGKILL and
# resume, a deployment) is the system stage, a run of its own:
# scripts/gpu-system-check.sh.
#
# Without a GPU (or with BURST_GPU_CHECK_DEVICE=cpu) the same stages run on
# the CPU with small shapes: a rehearsal of the script, the build and the
# report. Environment: PYTHON (the one with torch; default: the project's
# .venv where there is one, else python3),
# BURST_GPU_CHECK_BUDGET (seconds for the whole run, default 540),
# BURST_GPU_CHECK_WORK (scratch, default /tmp/burst-gpu-check),
# BURST_GPU_CHECK_BUILD (the build folder, default WORK/build),
# BURST_GPU_CHECK_STAGES (a regular expression: only the stages it matches)
# and BURST_GPU_CHECK_TARGETS (what to build; default burst_bench parity_test)
# for a short rerun of part of the check.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
out=${1:?usage: scripts/gpu-check.sh OUT_DIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
py=${PYTHON:-$([ -x "$root/.venv/bin/python" ] && echo "$root/.venv/bin/python" || echo python3)}
budget=${BURST_GPU_CHECK_BUDGET:-540}
raw=$out/results.jsonl
log=$out/log.txt
work=${BURST_GPU_CHECK_WORK:-/tmp/burst-gpu-check}
: > "$raw"
: > "$log"
rm -rf "$work"
mkdir -p "$work"
start=$SECONDS

say() { echo "[gpu-check $((SECONDS - start))s] $*" | tee -a "$log" >&2; }
left() { echo $((budget - (SECONDS - start))); }
# record STAGE JSON: one line of results.jsonl, tagged with its stage.
record() {
  "$py" -c 'import json,sys; d=json.loads(sys.argv[2]) if sys.argv[2].strip().startswith("{") else {"error": sys.argv[2][-2000:]}; d["stage"]=sys.argv[1]; print(json.dumps(d))' "$1" "$2" >> "$raw"
}
# step STAGE SECONDS CMD...: runs CMD with a time limit (never past the
# budget), records its last stdout line when it is JSON, else the failure.
step() {
  local stage=$1 limit=$2
  shift 2
  if [ -n "${BURST_GPU_CHECK_STAGES:-}" ] && ! [[ $stage =~ $BURST_GPU_CHECK_STAGES ]]; then
    return 0  # not asked for this time
  fi
  local remaining
  remaining=$(left)
  if [ "$remaining" -lt 20 ]; then
    say "$stage: skipped (budget spent)"
    record "$stage" '{"skipped": "budget spent"}'
    return 1
  fi
  [ "$limit" -gt "$remaining" ] && limit=$remaining
  say "$stage: $* (limit ${limit}s)"
  local t0=$SECONDS rc=0
  timeout --kill-after=5 "$limit" "$@" > "$work/$stage.out" 2> "$work/$stage.err" || rc=$?
  cat "$work/$stage.err" >> "$log"
  local line
  line=$(grep '^{' "$work/$stage.out" | tail -1)
  if [ -n "$line" ]; then
    record "$stage" "$line"
  elif [ "$rc" = 0 ] && grep -q '^\[  PASSED  \] 0 tests' "$work/$stage.out"; then
    # A test binary whose tests all skipped checked nothing: say so.
    record "$stage" "{\"skipped\": $("$py" -c 'import json,sys; print(json.dumps(sys.argv[1]))' "$(grep -m1 -A1 'Skipped' "$work/$stage.out" | tail -1)")}"
  elif [ "$rc" = 0 ]; then
    record "$stage" "{\"ok\": true, \"output\": $("$py" -c 'import json,sys; print(json.dumps(sys.argv[1]))' "$(tail -c 600 "$work/$stage.out")")}"
  else
    local why="exit $rc"
    [ "$rc" = 124 ] && why="timed out after ${limit}s"
    record "$stage" "{\"error\": $("$py" -c 'import json,sys; print(json.dumps(sys.argv[1]))' "$why: $(tail -c 1500 "$work/$stage.err")")}"
  fi
  say "$stage: exit $rc in $((SECONDS - t0))s"
  if { [ "$rc" = 139 ] || [ "$rc" = 134 ]; } && command -v cuda-gdb > /dev/null && [ "$(left)" -gt 60 ]; then
    # A crash: the same command under cuda-gdb, for its backtrace (OMP_WAIT_POLICY
    # set, so the engine does not re-execute itself first).
    say "$stage: crashed; its backtrace (cuda-gdb) follows in the log"
    OMP_WAIT_POLICY=PASSIVE timeout 60 cuda-gdb -q -batch -ex run -ex bt -ex "info threads" --args "$@" \
      > "$work/$stage.gdb" 2>&1
    grep -v "^\[New Thread\|^\[Thread" "$work/$stage.gdb" | tail -60 >> "$log"
    record "${stage}_backtrace" "{\"backtrace\": $("$py" -c 'import json,sys; print(json.dumps(sys.argv[1]))' "$(grep -E '^#[0-9]+ ' "$work/$stage.gdb" | head -25)")}"
  fi
  return $rc
}

# ---- the machine's facts, against the machine planned for
say "facts"
device=${BURST_GPU_CHECK_DEVICE:-}
if [ -z "$device" ]; then
  if "$py" -c 'import torch,sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then device=cuda; else device=cpu; fi
fi
"$py" scripts/gpu_facts.py "$device" > "$out/facts.json" 2>> "$log" || echo '{}' > "$out/facts.json"
cat "$out/facts.json" >> "$log"
torch_dir=$("$py" -c 'import json,sys; print(json.load(open(sys.argv[1])).get("torch_dir") or "")' "$out/facts.json")
abi=$("$py" -c 'import json,sys; print(json.load(open(sys.argv[1])).get("torch_cxx11_abi", 1))' "$out/facts.json")

# ---- build: the engine only, against the machine's libtorch
build=${BURST_GPU_CHECK_BUILD:-$work/build}  # an existing build folder is reused (rehearsals)
deps=$root/.deps/root/usr
cmake_args=(-S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DBURST_ENGINE_ONLY=ON -DBURST_WERROR=OFF)
command -v ninja > /dev/null && cmake_args+=(-G Ninja)
[ -d "$deps" ] && cmake_args+=(-DCMAKE_PREFIX_PATH="$deps" -DOPENSSL_ROOT_DIR="$deps")
if [ "$device" = cuda ]; then
  # The pip package's headers and libraries directly (cmake/torch_package.cmake).
  cmake_args+=(-DBURST_TORCH_PACKAGE="$torch_dir" -DBURST_TORCH_CXX11_ABI="$abi")
fi
say "configure: cmake ${cmake_args[*]}"
if cmake "${cmake_args[@]}" > "$work/configure.log" 2>&1; then
  record build_configure '{"ok": true}'
else
  cat "$work/configure.log" >> "$log"
  record build_configure "$(tail -c 1500 "$work/configure.log")"
fi
t0=$SECONDS
targets=(--target ${BURST_GPU_CHECK_TARGETS:-burst_bench parity_test})
built=0
if timeout 330 cmake --build "$build" -j"$(nproc)" "${targets[@]}" > "$work/build.log" 2>&1; then
  built=1
fi
if [ "$built" = 1 ]; then
  record build "{\"ok\": true, \"seconds\": $((SECONDS - t0)), \"jobs\": $(nproc)}"
else
  cp "$work/build.log" "$out/build.log"
  grep -B2 -A8 -m8 "error" "$work/build.log" >> "$log"
  record build "build failed (build.log): $(grep -A6 -m4 'error' "$work/build.log" | tail -c 1800)"
  say "build failed: $(grep -m3 'error' "$work/build.log")"
fi
say "build: $((SECONDS - t0))s"
bench=$build/bench/burst_bench
peer=(env PYTHONUNBUFFERED=1 "$py" "$root/bench/hf_peer.py")
have_peer=$("$py" -c 'import json,sys; f=json.load(open(sys.argv[1])); print(1 if f.get("transformers") and f.get("peft") else 0)' "$out/facts.json")

if [ "$device" = cuda ]; then
  # ---- the bf16 matrix rate: the MFU reference
  step gemm 60 "$bench" gemm --device cuda --dtype bfloat16 --size 8192 --repeats 20
  # ---- parity: tiny random model, CUDA vs CPU, Burst vs transformers + PEFT
  step init_tiny 60 "$bench" init --preset tiny --vocab 512 --seed 3 --out "$work/tiny"
  step parity 90 "$bench" parity --model "$work/tiny" --out "$work/parity" --seed 3
  [ "$have_peer" = 1 ] && step parity_hf 120 "${peer[@]}" parity --model "$work/tiny" --burst "$work/parity"
  # ---- LoRA training speed: Burst, then the peer, on each shape
  for shape in "llama3.1-8b 4 2048 5" "llama3.2-1b 8 2048 6"; do
    read -r preset batch seq steps <<< "$shape"
    args=(--preset "$preset" --batch-size "$batch" --seq-len "$seq" --steps "$steps" --warmup 2 --rank 16 --alpha 32)
    step "train_burst_$preset" 120 "$bench" train --device cuda "${args[@]}"
    [ "$have_peer" = 1 ] && step "train_hf_$preset" 150 "${peer[@]}" train "${args[@]}"
  done
  # ---- activation checkpointing: an 8B-shaped LoRA at 4,096 tokens (goal:
  # within 40 GiB; 71-73 GiB without it), its peak beside the rows above
  step "train_burst_llama3.1-8b_checkpointed" 150 "$bench" train --device cuda --preset llama3.1-8b \
    --batch-size 1 --seq-len 4096 --steps 2 --warmup 1 --rank 16 --alpha 32 --checkpoint-layers
  # ---- a short run and its resume, with deterministic kernels and without
  CUBLAS_WORKSPACE_CONFIG=:4096:8 step resume_deterministic 90 "$bench" resume --out "$work/resume-det" \
    --device cuda --deterministic
  step resume 90 "$bench" resume --out "$work/resume" --device cuda
  # ---- sampling with the KV cache against generate()
  for shape in "llama3.2-1b 1" "llama3.2-1b 16"; do
    read -r preset batch <<< "$shape"
    args=(--preset "$preset" --prompt-len 128 --new-tokens 128 --batch-size "$batch")
    step "sample_burst_${preset}_b$batch" 90 "$bench" sample --device cuda "${args[@]}"
    [ "$have_peer" = 1 ] && step "sample_hf_${preset}_b$batch" 120 "${peer[@]}" sample "${args[@]}"
  done
  # ---- the 2.x build's CPU parity tests, against tests/reference/llama_ref.py
  # run by this machine's PyTorch (Debian's /usr/bin/python3 is not there)
  BURST_REFERENCE_PYTHON=$(command -v "$py") step parity_test 90 "$build/src/parity_test" --gtest_brief=1
else
  # The rehearsal on the CPU: the same stages on small shapes.
  step gemm 60 "$bench" gemm --device cpu --size 512 --threads 2
  step init_tiny 60 "$bench" init --preset tiny --vocab 512 --seed 3 --out "$work/tiny"
  args=(--preset small --vocab 512 --batch-size 2 --seq-len 64 --steps 3 --warmup 1 --threads 2)
  step train_burst_small 120 "$bench" train --device cpu "${args[@]}"
  step train_burst_small_checkpointed 120 "$bench" train --device cpu "${args[@]}" --checkpoint-layers
  step resume 240 "$bench" resume --out "$work/resume" --device cpu --steps 6 --stop-at 3
  step sample_burst_small_b1 60 "$bench" sample --device cpu --preset small --vocab 512 --prompt-len 16 \
    --new-tokens 16 --threads 2
  step parity_test 120 "$build/src/parity_test" --gtest_brief=1
fi

say "report"
"$py" scripts/gpu_report.py "$out" > "$out/report.md" 2>> "$log" || say "report failed"
say "done in $((SECONDS - start))s: $out/report.md"
cat "$out/report.md"
