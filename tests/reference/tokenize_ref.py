"""Reference tokenization for Burst's BPE tests, by Hugging Face's own
tokenizers library (the Rust one, from the project's .venv).

Usage: .venv/bin/python tokenize_ref.py TOKENIZER_JSON TEXTS_JSON
  TEXTS_JSON holds a JSON array of strings. Prints one JSON array with the
  id array of each text, in order.

Encodes with add_special_tokens=False: Burst's Encode never adds BOS/EOS, and
added tokens written in the text are still matched (Burst's
allow_special=true). No tokenizer_config.json is read, so nothing from it
(clean-up of spaces, extra special tokens) changes the ids.
"""
import json
import sys

from tokenizers import Tokenizer

if len(sys.argv) != 3:
    sys.exit("usage: tokenize_ref.py TOKENIZER_JSON TEXTS_JSON")
tokenizer = Tokenizer.from_file(sys.argv[1])
with open(sys.argv[2], encoding="utf-8") as f:
    texts = json.load(f)
if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
    sys.exit(f"{sys.argv[2]}: expected a JSON array of strings")
encodings = tokenizer.encode_batch(texts, add_special_tokens=False)
sys.stdout.write(json.dumps([e.ids for e in encodings]) + "\n")
