#!/usr/bin/env bash
# A mixture of experts on the CPU against transformers (docs/bench.md,
# "Mixture of experts"): a small Qwen 3 MoE that transformers writes
# (tests/reference/hf_ref.py make: 4 layers, 256 wide, 16 experts of 128,
# 4 a token, vocab 4096), trained by `burst_bench train` and by
# transformers + PEFT (bench/peer_hf.py) on the same torch, threads,
# batches and LoRA (every projection: the attention's and the experts'),
# then in full; and decoded greedily (`burst_bench sample` against
# generate()). Each pair runs ROUNDS times alternating, the best of each
# side kept (these machines are noisy).
# Builds nothing: `cmake -DBURST_BENCH=ON` and build burst_bench first.
#
# Environment (defaults in brackets): THREADS [2] BATCH [8] SEQ [128]
# STEPS [10] ROUNDS [2] BENCH [build/bench/burst_bench] PYTHON [.venv/bin/python]
set -euo pipefail
cd "$(dirname "$0")/.."
THREADS=${THREADS:-2} BATCH=${BATCH:-8} SEQ=${SEQ:-128} STEPS=${STEPS:-10} ROUNDS=${ROUNDS:-2}
BENCH=${BENCH:-build/bench/burst_bench} PYTHON=${PYTHON:-.venv/bin/python}
[ -x "$BENCH" ] || { echo "moe_bench: $BENCH is not built (cmake -DBURST_BENCH=ON; build burst_bench)" >&2; exit 1; }
dir=$(mktemp -d /tmp/burst-moe-bench.XXXXXX)
trap 'rm -rf "$dir"' EXIT
cat > "$dir/config.json" <<'JSON'
{"model_type": "qwen3_moe", "vocab_size": 4096, "hidden_size": 256, "intermediate_size": 512,
 "moe_intermediate_size": 128, "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 4,
 "head_dim": 32, "num_experts": 16, "num_experts_per_tok": 4, "norm_topk_prob": true,
 "max_position_embeddings": 1024, "tie_word_embeddings": true}
JSON
"$PYTHON" tests/reference/hf_ref.py make --config "$dir/config.json" --out "$dir/model" --std 0.02 >/dev/null 2>&1

# The best tokens_per_s of ROUNDS runs of each side, alternating; one JSON line.
compare() {  # compare NAME "BURST ARGS" "PEER ARGS"
  local name=$1 ours=$2 peer=$3 b=0 p=0 line v
  for _ in $(seq "$ROUNDS"); do
    line=$($BENCH $ours 2>/dev/null | tail -1); v=$(echo "$line" | "$PYTHON" -c 'import json,sys; print(json.loads(sys.stdin.read())["tokens_per_s"])')
    b=$("$PYTHON" -c "print(max($b, $v))")
    line=$("$PYTHON" bench/peer_hf.py $peer 2>/dev/null | tail -1); v=$(echo "$line" | "$PYTHON" -c 'import json,sys; print(json.loads(sys.stdin.read())["tokens_per_s"])')
    p=$("$PYTHON" -c "print(max($p, $v))")
  done
  "$PYTHON" -c "import json; print(json.dumps({'case': '$name', 'burst_tokens_per_s': round($b, 1), 'transformers_tokens_per_s': round($p, 1), 'ratio': round($b / $p, 3), 'threads': $THREADS}))"
}
m="$dir/model"
common="--batch-size $BATCH --seq-len $SEQ --steps $STEPS --warmup 2 --threads $THREADS --lr 1e-4 --seed 0"
compare train_lora "train --model $m --method lora --rank 8 --alpha 16 --targets q,k,v,o,gate,up,down $common" \
  "train --model $m --method lora --rank 8 --alpha 16 --targets q,k,v,o,gate,up,down $common"
compare train_full "train --model $m --method full $common" "train --model $m --method full $common"
compare decode_b1 "sample --model $m --prompt-len 32 --new-tokens 64 --batch-size 1 --threads $THREADS --seed 0" \
  "sample --model $m --prompt-len 32 --new-tokens 64 --batch-size 1 --threads $THREADS --seed 0"
