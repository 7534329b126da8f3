#!/bin/bash
# The GPU check's system stage: the whole of Burst on the lent GPU machine,
# as a user runs it (scripts/gpu_system.py: burst serve --gpus all, a LoRA
# job on a 1B-shaped model from zero to its last checkpoint, the same job
# with its worker killed by SIGKILL and resumed to the same adapter bytes,
# the checkpoint deployed on a GPU answering 16 calls at once).
#
# The machine has no package registry, so Burst is built here and carried:
#
#   scripts/gpu-system-pack.sh              # here: build/src/burst, burst-engine and the
#                                           # libraries they need besides libtorch and glibc
#                                           # -> .gpu-system/pack.tar.xz
#   scripts/gpu-system-check.sh OUT_DIR     # there (the device tool carries .gpu-system)
#
# It runs the carried binary against that machine's own PyTorch libraries
# (the same release as the project's venv: requirements/test.lock), so the
# binary's CUDA code is that release's. OUT_DIR gets system.jsonl (one JSON
# line per stage), system.md and system-log.txt. Without a GPU (or with
# BURST_GPU_CHECK_DEVICE=cpu) the same stages run on CPU slots, small: a
# rehearsal. BURST_GPU_SYSTEM_BUDGET: seconds for the whole run (default 540).
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
out=${1:?usage: scripts/gpu-system-check.sh OUT_DIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
py=${PYTHON:-python3}
budget=${BURST_GPU_SYSTEM_BUDGET:-540}
work=${BURST_GPU_SYSTEM_WORK:-/tmp/burst-gpu-system}
log=$out/system-log.txt
: > "$log"
rm -rf "$work"
mkdir -p "$work"
tar -xJf "${BURST_GPU_SYSTEM_PACK:-$root/.gpu-system/pack.tar.xz}" -C "$work" 2>> "$log"
pack=$work/pack
device=${BURST_GPU_CHECK_DEVICE:-}
if [ -z "$device" ]; then
  if "$py" -c 'import torch,sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then device=cuda; else device=cpu; fi
fi
torch_lib=$("$py" -c 'import os,torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))' 2>>"$log")
export LD_LIBRARY_PATH="$pack/lib${torch_lib:+:$torch_lib}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
{
  echo "device: $device; torch: $("$py" -c 'import torch; print(torch.__version__)' 2>&1); libraries: $LD_LIBRARY_PATH"
  echo "packed with: $(cat "$pack/PACKED" 2>/dev/null || echo 'nothing: run scripts/gpu-system-pack.sh here first')"
  echo "missing libraries: $(ldd "$pack/burst" 2>&1 | grep 'not found' | tr '\n' ' ')"
} >> "$log"
raw=$out/system.jsonl
if [ ! -x "$pack/burst" ]; then
  echo '{"stage": "system", "ok": false, "error": "no carried burst binary: scripts/gpu-system-pack.sh first"}' > "$raw"
else
  PYTHONUNBUFFERED=1 timeout --kill-after=10 "$budget" "$py" scripts/gpu_system.py --burst "$pack/burst" \
    --work "$work" --device "$device" > "$raw" 2>> "$log"
  echo "gpu_system.py: exit $?" >> "$log"
fi
# The workers' logs, for a failure's cause.
tail -n 40 "$work"/data/workers/logs/*.log >> "$log" 2>/dev/null
{
  echo "# GPU check, system stage ($device)"
  echo
  echo "| stage | ok | figures |"
  echo "| --- | --- | --- |"
  "$py" -c '
import json, sys
for line in open(sys.argv[1]):
    if not line.startswith("{"):
        continue
    d = json.loads(line)
    stage = d.pop("stage", "?")
    ok = d.pop("ok", "error" not in d)
    print("| %s | %s | %s |" % (stage, "yes" if ok else "**no**", json.dumps(d)[:600].replace("|", "/")))
' "$raw"
} > "$out/system.md"
cat "$out/system.md"
