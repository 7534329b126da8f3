#!/usr/bin/env bash
# `make run`: fine-tune the shipped base model (models/burst-small) on the
# support-ticket demo, print baseline vs fine-tuned accuracy on the held-out
# split, then classify one held-out ticket with the fine-tuned checkpoint.
set -euo pipefail
cd "$(dirname "$0")/.."
BURST=${BURST:-build/src/burst}
RUN=${RUN:-runs/support}

"$BURST" train --config examples/support/recipe.json --out "$RUN" --overwrite
sampler=$(ls -d "$RUN"/checkpoints/step-*/sampler | sort | tail -n 1)
echo
echo "a held-out ticket (examples/support/ticket.json):"
sed -n 's/.*"content": "\(.*\)"$/  \1/p' examples/support/ticket.json | tail -n 1
printf "fine-tuned model says: "
"$BURST" sample --model "$sampler" --messages examples/support/ticket.json --temperature 0 --max-tokens 8
echo
echo "try it yourself:"
echo "  $BURST sample --model $sampler --messages examples/support/ticket.json --temperature 0"
echo "  $BURST eval --model $sampler --data examples/support/valid.jsonl"
