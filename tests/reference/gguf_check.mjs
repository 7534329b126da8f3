// Reads a GGUF file that `burst export --gguf` wrote with Hugging Face's
// own reader (@huggingface/gguf) and compares every tensor with the same
// model exported as a Hugging Face folder (float32 safetensors): names
// mapped and (for the llama architecture) q/k rows permuted as llama.cpp's convert_hf_to_gguf.py does,
// a mixture of experts' weights stacked per projection, Gemma 3's norms as
// 1 + w (written out here on their own, not taken from Burst), values decoded
// from f32, f16 or q8_0 and checked against what that encoding can hold.
// Usage: node gguf_check.mjs FILE.gguf HF_FOLDER
// Prints one JSON object: the metadata (arrays as their length and first
// entries, tokens in full), and per tensor its dtype, shape, the largest
// error and whether every value is within its encoding's bound.
import fs from "node:fs";
import path from "node:path";
import { gguf } from "@huggingface/gguf";

const [file, refDir] = process.argv.slice(2);
const { metadata, tensorInfos, tensorDataOffset } = await gguf(path.resolve(file), { allowLocalFile: true });
const bytes = fs.readFileSync(file);
const config = JSON.parse(fs.readFileSync(path.join(refDir, "config.json"), "utf8"));

// The reference weights.
const st = fs.readFileSync(path.join(refDir, "model.safetensors"));
const headerLen = Number(st.readBigUInt64LE(0));
const header = JSON.parse(st.subarray(8, 8 + headerLen).toString("utf8"));
function refTensor(name) {
  const h = header[name];
  if (!h) return null;
  if (h.dtype !== "F32") throw new Error(`${name}: reference dtype ${h.dtype}, want F32`);
  const [a, b] = h.data_offsets;
  const buf = st.subarray(8 + headerLen + a, 8 + headerLen + b);
  return { shape: h.shape, data: new Float32Array(buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.length)) };
}

// llama.cpp's names, from its converter's tensor map for Llama.
const layerNames = {
  attn_norm: "input_layernorm", attn_q: "self_attn.q_proj", attn_k: "self_attn.k_proj", attn_v: "self_attn.v_proj",
  attn_output: "self_attn.o_proj", ffn_norm: "post_attention_layernorm", ffn_gate: "mlp.gate_proj",
  ffn_up: "mlp.up_proj", ffn_down: "mlp.down_proj", attn_q_norm: "self_attn.q_norm", attn_k_norm: "self_attn.k_norm",
};
// Only the converter's Llama permutes q and k; Qwen's rotate halves as Hugging Face does.
const arch = metadata["general.architecture"];
const permuted = arch === "llama";
// gemma3: four norms a layer.
const gemmaNames = {
  post_attention_norm: "post_attention_layernorm", ffn_norm: "pre_feedforward_layernorm",
  post_ffw_norm: "post_feedforward_layernorm",
};
// Each projection's experts, stacked: [qwen3moe's name, Mixtral's].
const expertNames = { ffn_gate_exps: ["gate_proj", "w1"], ffn_up_exps: ["up_proj", "w3"], ffn_down_exps: ["down_proj", "w2"] };
const mixtral = Object.keys(header).some((k) => k.includes(".block_sparse_moe."));
// The Hugging Face tensor a GGUF tensor must hold (before any permutation).
function reference(name) {
  const m = /^blk\.(\d+)\.([a-z_]+)\.weight$/.exec(name);
  const moe = mixtral ? "block_sparse_moe" : "mlp";
  if (m && expertNames[m[2]]) {
    const proj = expertNames[m[2]][mixtral ? 1 : 0];
    const parts = [];
    for (let e = 0; ; e++) {
      const t = refTensor(`model.layers.${m[1]}.${moe}.experts.${e}.${proj}.weight`);
      if (!t) break;
      parts.push(t);
    }
    if (!parts.length) return null;
    const data = new Float32Array(parts.length * parts[0].data.length);
    parts.forEach((t, e) => data.set(t.data, e * t.data.length));
    return { shape: [parts.length, ...parts[0].shape], data };
  }
  if (m && m[2] === "ffn_gate_inp") return refTensor(`model.layers.${m[1]}.${moe}.gate.weight`);
  const hf = arch === "gemma3" && m && gemmaNames[m[2]] ? `model.layers.${m[1]}.${gemmaNames[m[2]]}.weight` : hfName(name);
  const t = refTensor(hf);
  if (t && arch === "gemma3" && hf.endsWith("norm.weight")) t.data = t.data.map((x) => Math.fround(x + 1));
  return t;
}
function hfName(name) {
  if (name === "token_embd.weight") return "model.embed_tokens.weight";
  if (name === "output_norm.weight") return "model.norm.weight";
  if (name === "output.weight") return "lm_head.weight";
  const m = /^blk\.(\d+)\.([a-z_]+)\.(weight|bias)$/.exec(name);
  if (!m || !layerNames[m[2]]) throw new Error(`unexpected tensor ${name}`);
  return `model.layers.${m[1]}.${layerNames[m[2]]}.${m[3]}`;
}
// convert_hf_to_gguf.py's LlamaModel.permute(w, n_head):
// w.reshape(n_head, 2, rows / n_head / 2, cols).swapaxes(1, 2).reshape(rows, cols)
function permute(t, heads) {
  const rows = t.shape[0], cols = t.shape.length > 1 ? t.shape[1] : 1, half = rows / heads / 2;
  const out = new Float32Array(t.data.length);
  for (let h = 0; h < heads; h++)
    for (let two = 0; two < 2; two++)
      for (let r = 0; r < half; r++) {
        const from = (h * 2 * half + two * half + r) * cols, to = (h * 2 * half + r * 2 + two) * cols;
        out.set(t.data.subarray(from, from + cols), to);
      }
  return { shape: t.shape, data: out };
}

function half(h) {
  const s = h & 0x8000 ? -1 : 1, e = (h >> 10) & 0x1f, m = h & 0x3ff;
  if (e === 0) return s * m * 2 ** -24;
  if (e === 31) return m ? NaN : s * Infinity;
  return s * (1 + m / 1024) * 2 ** (e - 15);
}

const dataStart = Number(tensorDataOffset);
const tensors = [];
for (const info of tensorInfos) {
  const ne = info.shape.map(Number);
  const n = ne.reduce((a, b) => a * b, 1);
  const at = dataStart + Number(info.offset);
  const row = { name: info.name, dtype: info.dtype, ne, aligned: Number(info.offset) % 32 === 0 };
  tensors.push(row);
  if (info.name === "rope_freqs.weight") continue;
  let ref = reference(info.name);
  if (!ref) { row.missing_reference = true; continue; }
  if (permuted && /\.attn_q\./.test(info.name)) ref = permute(ref, config.num_attention_heads);
  if (permuted && /\.attn_k\./.test(info.name)) ref = permute(ref, config.num_key_value_heads);
  row.shape_matches = JSON.stringify([...ne].reverse()) === JSON.stringify(ref.shape);
  let maxErr = 0, ok = true, maxRef = 0;
  if (info.dtype === 0 || info.dtype === 1) {
    for (let i = 0; i < n; i++) {
      const v = info.dtype === 0 ? bytes.readFloatLE(at + 4 * i) : half(bytes.readUInt16LE(at + 2 * i));
      const err = Math.abs(v - ref.data[i]);
      maxErr = Math.max(maxErr, err);
      maxRef = Math.max(maxRef, Math.abs(ref.data[i]));
      // f32: exact; f16: round to nearest, 2^-11 of the value (2^-25 among subnormals).
      if (info.dtype === 0 ? err !== 0 : err > Math.abs(ref.data[i]) * 2 ** -11 + 2 ** -25) ok = false;
    }
  } else if (info.dtype === 8) {
    for (let b = 0; b < n / 32; b++) {
      const block = at + b * 34, d16 = half(bytes.readUInt16LE(block));
      let amax = 0;
      for (let j = 0; j < 32; j++) amax = Math.max(amax, Math.abs(ref.data[b * 32 + j]));
      const d = Math.fround(amax / 127);
      for (let j = 0; j < 32; j++) {
        const v = bytes.readInt8(block + 2 + j) * d16, err = Math.abs(v - ref.data[b * 32 + j]);
        maxErr = Math.max(maxErr, err);
        // Half a step, plus what the scale lost to f16, on the largest quotient.
        if (err > 0.5 * d16 + 127 * Math.abs(d16 - d) + 1e-7) ok = false;
      }
      maxRef = Math.max(maxRef, amax);
    }
  } else {
    ok = false;
  }
  Object.assign(row, { max_err: maxErr, max_ref: maxRef, within_bound: ok });
}
const meta = {};
for (const [k, v] of Object.entries(metadata)) {
  if (Array.isArray(v)) meta[k] = { length: v.length, head: v.slice(0, 8).map((x) => (typeof x === "bigint" ? Number(x) : x)) };
  else meta[k] = typeof v === "bigint" ? Number(v) : v;
}
console.log(JSON.stringify({
  metadata: meta, tokens: metadata["tokenizer.ggml.tokens"], token_type: metadata["tokenizer.ggml.token_type"],
  scores: metadata["tokenizer.ggml.scores"] || null, merges: metadata["tokenizer.ggml.merges"] || null, tensors,
}));
