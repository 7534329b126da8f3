"""Reads a GGUF file that `burst export --gguf` wrote with the `gguf` Python
package (llama.cpp's own reader, GGUFReader, and its dequantize) and
compares every tensor with the same model exported as a Hugging Face folder
(float32 safetensors): names mapped and (for the llama architecture) q/k rows permuted as llama.cpp's
convert_hf_to_gguf.py does, a mixture of experts' weights stacked per
projection, Gemma 3's norms as 1 + w (written out here on their own, not
taken from Burst), values decoded by gguf and checked against what their
encoding (f32, f16, q8_0) can hold.

Usage: .venv/bin/python gguf_check.py FILE.gguf HF_FOLDER
Prints one JSON object, as gguf_check.mjs does: the metadata (arrays as
their length and first entries, tokens in full), and per tensor its dtype,
shape (ne), the largest error and whether every value is within its
encoding's bound.
"""
import json
import os
import re
import sys

import numpy as np
from gguf import GGMLQuantizationType, GGUFReader
from gguf.quants import dequantize
from safetensors.numpy import load_file

LAYER_NAMES = {
    "attn_norm": "input_layernorm", "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj", "ffn_norm": "post_attention_layernorm",
    "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj",
    "attn_q_norm": "self_attn.q_norm", "attn_k_norm": "self_attn.k_norm",
}
# gemma3: four norms a layer.
GEMMA_NAMES = {"post_attention_norm": "post_attention_layernorm", "ffn_norm": "pre_feedforward_layernorm",
               "post_ffw_norm": "post_feedforward_layernorm"}
# Each projection's experts, stacked: (qwen3moe's names, Mixtral's).
EXPERTS = {"ffn_gate_exps": ("gate_proj", "w1"), "ffn_up_exps": ("up_proj", "w3"),
           "ffn_down_exps": ("down_proj", "w2")}


def reference(name, ref, arch):
    """The Hugging Face tensor a GGUF tensor must hold (before any permutation)."""
    m = re.fullmatch(r"blk\.(\d+)\.([a-z_]+)\.weight", name)
    mixtral = any(".block_sparse_moe." in k for k in ref)
    moe = "block_sparse_moe" if mixtral else "mlp"
    if m and m.group(2) in EXPERTS:
        proj = EXPERTS[m.group(2)][1 if mixtral else 0]
        experts = []
        while f"model.layers.{m.group(1)}.{moe}.experts.{len(experts)}.{proj}.weight" in ref:
            experts.append(ref[f"model.layers.{m.group(1)}.{moe}.experts.{len(experts)}.{proj}.weight"])
        return np.stack(experts) if experts else None
    if m and m.group(2) == "ffn_gate_inp":
        return ref.get(f"model.layers.{m.group(1)}.{moe}.gate.weight")
    if arch == "gemma3" and m and m.group(2) in GEMMA_NAMES:
        hf = f"model.layers.{m.group(1)}.{GEMMA_NAMES[m.group(2)]}.weight"
    else:
        hf = hf_name(name)
    want = ref.get(hf)
    if want is not None and arch == "gemma3" and hf.endswith("norm.weight"):
        want = want + np.float32(1)
    return want


def hf_name(name):
    fixed = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight",
             "output.weight": "lm_head.weight"}
    if name in fixed:
        return fixed[name]
    m = re.fullmatch(r"blk\.(\d+)\.([a-z_]+)\.(weight|bias)", name)
    if not m or m.group(2) not in LAYER_NAMES:
        raise ValueError(f"unexpected tensor {name}")
    return f"model.layers.{m.group(1)}.{LAYER_NAMES[m.group(2)]}.{m.group(3)}"


def permute(w, heads):
    # convert_hf_to_gguf.py's LlamaModel.permute
    shape = w.shape
    rows = shape[0]
    return w.reshape(heads, 2, rows // heads // 2, *shape[1:]).swapaxes(1, 2).reshape(shape)


def plain(v):
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating,)):
        return float(v)
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    return v


def main():
    path, ref_dir = sys.argv[1], sys.argv[2]
    reader = GGUFReader(path)
    with open(os.path.join(ref_dir, "config.json")) as f:
        config = json.load(f)
    ref = load_file(os.path.join(ref_dir, "model.safetensors"))
    # Only the converter's Llama permutes q and k (ggml's interleaved rotary);
    # Qwen's architectures rotate halves as Hugging Face does.
    arch_field = reader.fields["general.architecture"]
    arch = bytes(arch_field.parts[arch_field.data[0]]).decode()
    permuted = arch == "llama"
    tensors = []
    for t in reader.tensors:
        ne = [int(x) for x in t.shape]
        qtype = GGMLQuantizationType(t.tensor_type)
        row = {"name": t.name, "dtype": int(qtype), "ne": ne,
               "aligned": (int(t.data_offset) - int(reader.data_offset)) % 32 == 0}
        tensors.append(row)
        if t.name == "rope_freqs.weight":
            continue
        want = reference(t.name, ref, arch)
        if want is None:
            row["missing_reference"] = True
            continue
        if want.dtype != np.float32:
            raise ValueError(f"{t.name}: reference dtype {want.dtype}, want float32")
        if permuted and ".attn_q." in t.name:
            want = permute(want, config["num_attention_heads"])
        if permuted and ".attn_k." in t.name:
            want = permute(want, config["num_key_value_heads"])
        row["shape_matches"] = list(reversed(ne)) == list(want.shape)
        got = dequantize(t.data, qtype).astype(np.float64).reshape(-1)
        w = want.astype(np.float64).reshape(-1)
        err = np.abs(got - w) if got.size == w.size else np.array([np.inf])
        if qtype == GGMLQuantizationType.F32:
            ok = bool((err == 0).all())
        elif qtype == GGMLQuantizationType.F16:
            # Round to nearest: 2^-11 of the value (2^-25 among subnormals).
            ok = bool((err <= np.abs(w) * 2.0 ** -11 + 2.0 ** -25).all())
        elif qtype == GGMLQuantizationType.Q8_0:
            blocks = np.frombuffer(t.data.tobytes(), dtype=np.uint8).reshape(-1, 34)
            d16 = blocks[:, :2].copy().view(np.float16).astype(np.float64).reshape(-1)
            amax = np.abs(w.reshape(-1, 32)).max(axis=1)
            d = (amax / 127).astype(np.float32).astype(np.float64)
            # Half a step, plus what the scale lost to f16, on the largest quotient.
            bound = 0.5 * d16 + 127 * np.abs(d16 - d) + 1e-7
            ok = bool((err.reshape(-1, 32) <= bound[:, None]).all())
        else:
            ok = False
        row.update({"max_err": float(err.max()) if err.size else 0.0,
                    "max_ref": float(np.abs(w).max()) if w.size else 0.0, "within_bound": ok})
    meta, values = {}, {}
    for name, field in reader.fields.items():
        if name.startswith("GGUF."):
            continue
        v = field.contents()
        values[name] = v
        if isinstance(v, list):
            meta[name] = {"length": len(v), "head": [plain(x) for x in v[:8]]}
        else:
            meta[name] = plain(v)
    print(json.dumps({
        "metadata": meta, "tokens": values.get("tokenizer.ggml.tokens"),
        "token_type": values.get("tokenizer.ggml.token_type"), "scores": values.get("tokenizer.ggml.scores"),
        "merges": values.get("tokenizer.ggml.merges"), "tensors": tensors,
    }))


if __name__ == "__main__":
    main()
