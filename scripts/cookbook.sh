#!/usr/bin/env bash
# `make cookbook`: the Tinker cookbook's own supervised and RL loops
# (tinker-cookbook from PyPI, run by examples/cookbook/recipes.py) against
# the embedded control plane (burst serve under runs/cookbook-data, local
# workers), on runs/cookbook-models/tiny-qwen3: a Qwen 3 model with random
# weights made here, so the loops run as they would on a real one but their
# loss and reward say nothing about the model. The cookbook's logs
# (metrics.jsonl, checkpoints.jsonl) go to runs/cookbook/{sl,rl}.
set -euo pipefail
cd "$(dirname "$0")/.."
BURST=${BURST:-build/src/burst}
DATA=${DATA:-runs/cookbook-data}
MODELS=${MODELS:-runs/cookbook-models}
PY=.venv/bin/python
"$PY" examples/cookbook/recipes.py make-model --models "$MODELS" >/dev/null
BURST_MODELS_DIR=$(realpath "$MODELS")
export BURST_MODELS_DIR
. scripts/serve-local.sh
start_serve "${SLOTS:-2}" 60
export TINKER_BASE_URL=$BURST_URL TINKER_API_KEY=tml-$BURST_API_KEY
rm -rf runs/cookbook
for loop in sl rl; do
  echo "== the cookbook's $loop loop (tinker_cookbook.$([ $loop = sl ] && echo supervised || echo rl).train)"
  "$PY" examples/cookbook/recipes.py "$loop" --models "$MODELS" --out "runs/cookbook/$loop"
  echo "   its metrics: runs/cookbook/$loop/metrics.jsonl"
done
