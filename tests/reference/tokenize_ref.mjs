// Reference tokenization for Burst's BPE tests, using Hugging Face's own JS
// implementation (@huggingface/tokenizers).
//
// Usage: node tokenize_ref.mjs TOKENIZER_JSON TEXTS_JSON
//   TEXTS_JSON holds a JSON array of strings. Prints one JSON array with the
//   id array of each text, in order.
//
// Encodes with add_special_tokens=false: Burst's Encode never adds BOS/EOS, and
// added tokens written in the text are still matched (Burst's
// allow_special=true). No tokenizer_config.json is passed, so nothing from it
// (clean-up of spaces, extra special tokens) changes the ids.
import { readFileSync } from "node:fs";
import { Tokenizer } from "@huggingface/tokenizers";

const [tokenizerPath, textsPath] = process.argv.slice(2);
if (!tokenizerPath || !textsPath) {
  console.error("usage: node tokenize_ref.mjs TOKENIZER_JSON TEXTS_JSON");
  process.exit(2);
}
const tokenizer = new Tokenizer(JSON.parse(readFileSync(tokenizerPath, "utf8")), {});
const texts = JSON.parse(readFileSync(textsPath, "utf8"));
if (!Array.isArray(texts) || !texts.every((t) => typeof t === "string")) {
  console.error(`${textsPath}: expected a JSON array of strings`);
  process.exit(2);
}
const ids = texts.map((t) => tokenizer.encode(t, { add_special_tokens: false }).ids);
process.stdout.write(JSON.stringify(ids) + "\n");
