#!/usr/bin/env bash
# Rebuilds models/burst-small from nothing but Debian packages and Burst:
#   1. the corpus: WordNet 3.0 glosses (package wordnet-base, WordNet licence),
#   2. a 4096-piece SentencePiece BPE tokenizer (spm_train, package sentencepiece),
#   3. a random `small` Llama (burst init-model),
#   4. pretraining it on the corpus (burst train, method full),
#   5. copying the final sampler checkpoint to models/burst-small.
# Run from the repository root: `make base-model` (about an hour on 2 cores).
set -euo pipefail
cd "$(dirname "$0")/.."
BURST=${BURST:-build/src/burst}
OUT=build/base-model

if [ ! -d /usr/share/wordnet ]; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends wordnet-base
fi
/usr/bin/python3 scripts/make_corpus.py --out-dir build/corpus

mkdir -p "$OUT/spm"
spm_train --input=build/corpus/corpus.txt --model_prefix="$OUT/spm/tokenizer" \
  --vocab_size=4096 --model_type=bpe --character_coverage=1.0 --byte_fallback=true \
  --normalization_rule_name=identity --add_dummy_prefix=true --remove_extra_whitespaces=false \
  --split_digits=true --allow_whitespace_only_pieces=true \
  --user_defined_symbols='<|im_start|>,<|im_end|>' \
  --unk_id=0 --bos_id=1 --eos_id=2 --pad_id=-1 \
  --input_sentence_size=200000 --shuffle_input_sentence=true --seed_sentencepiece_size=1000000 \
  --num_threads=1 --max_sentence_length=8192 > "$OUT/spm/train.log" 2>&1

rm -rf "$OUT/init"
"$BURST" init-model --preset small --tokenizer "$OUT/spm/tokenizer.model" --out "$OUT/init" --seed 0
"$BURST" train --config examples/pretrain/recipe.json --out "$OUT/pretrain" --overwrite

final=$(ls -d "$OUT"/pretrain/checkpoints/step-*/sampler | sort | tail -n 1)
# The WordNet notice (models/burst-small/NOTICE, in git) stays: model cards
# of checkpoints trained from this model carry it.
notice=$(cat models/burst-small/NOTICE)
rm -rf models/burst-small
mkdir -p models/burst-small
printf '%s\n' "$notice" > models/burst-small/NOTICE
for f in config.json model.safetensors tokenizer.model tokenizer_config.json generation_config.json run.json; do
  cp "$final/$f" models/burst-small/
done
cp "$OUT/pretrain/metrics.jsonl" models/burst-small/pretrain_metrics.jsonl
echo "models/burst-small written from $final"
