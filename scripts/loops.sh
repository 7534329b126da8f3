#!/usr/bin/env bash
# `make loops`: the RL loop of examples/loops/rl.py against the embedded
# control plane (burst serve under runs/loops-data, local workers): reward
# = the right label of a support ticket; prints the mean reward and the
# held-out label accuracy per step, from the base model's upward.
set -euo pipefail
cd "$(dirname "$0")/.."
BURST=${BURST:-build/src/burst}
DATA=${DATA:-runs/loops-data}
. scripts/serve-local.sh
start_serve "${SLOTS:-2}" 60
.venv/bin/python "examples/loops/${LOOP:-rl}.py" "$@"
