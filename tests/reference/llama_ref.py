#!/usr/bin/python3
"""Independent reference of Hugging Face's LlamaForCausalLM forward pass in
plain PyTorch (no `transformers`, `peft` or `safetensors` package), with an
optional PEFT LoRA adapter, the weighted next-token loss and its gradients.

It follows the definition of HF's modeling_llama:
  * RMSNorm in float32: w * (x * rsqrt(mean(x^2) + eps)).to(input dtype)
  * rotary embedding, rotate_half convention: inv_freq = 1/theta^(arange(0,d,2)/d),
    emb = cat(freqs, freqs), q' = q*cos + rotate_half(q)*sin
    (rope_scaling types "default", "linear" and "llama3" are supported)
  * GQA attention (kv head of query head h is h // (n_heads / n_kv_heads)),
    scores = q k^T * head_dim^-0.5, causal mask, softmax in float32
  * SwiGLU MLP: down(silu(gate(x)) * up(x))
  * lm_head tied to embed_tokens when tie_word_embeddings is true or when the
    checkpoint has no lm_head.weight
  * LoRA (PEFT): y = base(x) + lora_B(lora_A(x)) * (lora_alpha / r)
    (lora_alpha / sqrt(r) with use_rslora; no dropout in the reference)

CLI:
  /usr/bin/python3 tests/reference/llama_ref.py --model DIR [--adapter DIR]
      --input IN.json --out OUT.safetensors [--threads N] [--float64]
      [--base-grads]
  /usr/bin/python3 tests/reference/llama_ref.py --selftest

IN.json: {"input_ids": [[...], ...], "loss_weights": [[...], ...]}
  input_ids (B, T); loss_weights (B, T-1): weight of the cross-entropy of
  predicting input_ids[b][t+1] from logits[b][t] (default: all ones).
OUT.safetensors (float32):
  logits (B, T, V); loss [1] = sum(w * CE) / sum(w); token_ce (B, T-1);
  with --adapter: grad.<PEFT key> for every LoRA tensor of the adapter;
  without --adapter and with --base-grads: grad.<HF name> of every base
  weight present in the checkpoint (with tied embeddings the lm_head
  gradient is part of grad.model.embed_tokens.weight).

The model also has a KV-cache path (used by bench/peer_sample.py only).
"""

import argparse
import json
import math
import os
import re
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402


# --------------------------------------------------------------------------
# Config


class LlamaConfig:
    def __init__(self, d):
        self.raw = dict(d)
        self.vocab_size = int(d["vocab_size"])
        self.hidden_size = int(d["hidden_size"])
        self.intermediate_size = int(d["intermediate_size"])
        self.num_hidden_layers = int(d["num_hidden_layers"])
        self.num_attention_heads = int(d["num_attention_heads"])
        kv = d.get("num_key_value_heads")
        self.num_key_value_heads = int(kv) if kv is not None else self.num_attention_heads
        hd = d.get("head_dim")
        self.head_dim = int(hd) if hd is not None else self.hidden_size // self.num_attention_heads
        self.rms_norm_eps = float(d.get("rms_norm_eps", 1e-6))
        self.rope_theta = float(d.get("rope_theta", 10000.0))
        self.rope_scaling = d.get("rope_scaling") or None
        self.tie_word_embeddings = bool(d.get("tie_word_embeddings", False))
        self.attention_bias = bool(d.get("attention_bias", False))
        self.mlp_bias = bool(d.get("mlp_bias", False))
        act = d.get("hidden_act", "silu")
        if act not in ("silu", "swish"):
            raise ValueError(f"hidden_act {act!r} is not supported (silu only)")
        if self.num_attention_heads % self.num_key_value_heads != 0:
            raise ValueError("num_attention_heads must be a multiple of num_key_value_heads")

    @classmethod
    def from_folder(cls, folder):
        with open(os.path.join(folder, "config.json")) as f:
            return cls(json.load(f))


def rope_inv_freq(cfg, dtype=torch.float32):
    """inv_freq as HF computes it (float32), with optional rope_scaling."""
    d = cfg.head_dim
    inv = 1.0 / (cfg.rope_theta ** (torch.arange(0, d, 2, dtype=torch.int64).to(dtype) / d))
    rs = cfg.rope_scaling
    if rs:
        kind = rs.get("rope_type", rs.get("type", "default"))
        if kind == "default":
            pass
        elif kind == "linear":
            inv = inv / float(rs["factor"])
        elif kind == "llama3":
            factor = float(rs["factor"])
            low = float(rs["low_freq_factor"])
            high = float(rs["high_freq_factor"])
            old_ctx = float(rs["original_max_position_embeddings"])
            low_wl = old_ctx / low
            high_wl = old_ctx / high
            wavelen = 2 * math.pi / inv
            inv_l = torch.where(wavelen > low_wl, inv / factor, inv)
            smooth = (old_ctx / wavelen - low) / (high - low)
            smoothed = (1 - smooth) * inv_l / factor + smooth * inv_l
            medium = ~(wavelen < high_wl) * ~(wavelen > low_wl)
            inv = torch.where(medium, smoothed, inv_l)
        else:
            raise ValueError(f"rope_scaling type {kind!r} is not supported")
    return inv


# --------------------------------------------------------------------------
# Weights and LoRA

LINEAR_SUFFIXES = {
    "q_proj": "self_attn.q_proj", "k_proj": "self_attn.k_proj",
    "v_proj": "self_attn.v_proj", "o_proj": "self_attn.o_proj",
    "gate_proj": "mlp.gate_proj", "up_proj": "mlp.up_proj", "down_proj": "mlp.down_proj",
}

PEFT_PREFIX = "base_model.model."


def linear_module_names(cfg):
    """HF module names of all linear layers inside the decoder layers."""
    names = []
    for i in range(cfg.num_hidden_layers):
        for short in ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"):
            names.append(f"model.layers.{i}.{LINEAR_SUFFIXES[short]}")
    return names


def module_targeted(module_name, target_modules):
    """PEFT's rule: a str is a full-match regex, a list matches the exact name
    or a name ending in '.<target>'. 'all-linear' = every linear but lm_head."""
    if target_modules == "all-linear":
        return True
    if isinstance(target_modules, str):
        return re.fullmatch(target_modules, module_name) is not None
    return any(module_name == t or module_name.endswith("." + t) for t in target_modules)


class LoRA:
    """One adapted linear layer: A (r, in), B (out, r), scale."""

    def __init__(self, A, B, scale, dropout=0.0):
        self.A = A
        self.B = B
        self.scale = scale
        self.dropout = dropout


class LlamaRef:
    """Functional Llama: weights are a dict {HF name: tensor}."""

    def __init__(self, cfg, weights, dtype=torch.float32):
        self.cfg = cfg
        self.dtype = dtype
        # Norms and softmax run in float32 as in HF, or float64 when the model is float64.
        self.acc_dtype = torch.float64 if dtype == torch.float64 else torch.float32
        self.w = {}
        for k, v in weights.items():
            if k.endswith("rotary_emb.inv_freq"):
                continue
            self.w[k] = v.to(dtype).contiguous()
        self.tied = cfg.tie_word_embeddings or "lm_head.weight" not in self.w
        if self.tied:
            self.w.pop("lm_head.weight", None)
        self._check()
        self.lora = {}  # HF module name -> LoRA
        self.training = False
        self.inv_freq = rope_inv_freq(cfg, torch.float32)
        if dtype == torch.float64:
            self.inv_freq = rope_inv_freq(cfg, torch.float64)

    def _check(self):
        c = self.cfg
        nh, nkv, hd, h = c.num_attention_heads, c.num_key_value_heads, c.head_dim, c.hidden_size
        want = {
            "model.embed_tokens.weight": (c.vocab_size, h),
            "model.norm.weight": (h,),
        }
        if not self.tied:
            want["lm_head.weight"] = (c.vocab_size, h)
        for i in range(c.num_hidden_layers):
            p = f"model.layers.{i}."
            want[p + "self_attn.q_proj.weight"] = (nh * hd, h)
            want[p + "self_attn.k_proj.weight"] = (nkv * hd, h)
            want[p + "self_attn.v_proj.weight"] = (nkv * hd, h)
            want[p + "self_attn.o_proj.weight"] = (h, nh * hd)
            want[p + "mlp.gate_proj.weight"] = (c.intermediate_size, h)
            want[p + "mlp.up_proj.weight"] = (c.intermediate_size, h)
            want[p + "mlp.down_proj.weight"] = (h, c.intermediate_size)
            want[p + "input_layernorm.weight"] = (h,)
            want[p + "post_attention_layernorm.weight"] = (h,)
            if c.attention_bias:
                want[p + "self_attn.q_proj.bias"] = (nh * hd,)
                want[p + "self_attn.k_proj.bias"] = (nkv * hd,)
                want[p + "self_attn.v_proj.bias"] = (nkv * hd,)
                want[p + "self_attn.o_proj.bias"] = (h,)
            if c.mlp_bias:
                want[p + "mlp.gate_proj.bias"] = (c.intermediate_size,)
                want[p + "mlp.up_proj.bias"] = (c.intermediate_size,)
                want[p + "mlp.down_proj.bias"] = (h,)
        for k, shape in want.items():
            if k not in self.w:
                raise KeyError(f"checkpoint lacks {k}")
            if tuple(self.w[k].shape) != shape:
                raise ValueError(f"{k}: shape {tuple(self.w[k].shape)}, expected {shape}")

    @classmethod
    def from_folder(cls, folder, dtype=torch.float32):
        cfg = LlamaConfig.from_folder(folder)
        weights = safetensors_io.load_checkpoint(folder, upcast=True)
        return cls(cfg, weights, dtype)

    # ---- LoRA ----------------------------------------------------------

    def load_adapter(self, folder):
        """Load a PEFT LoRA adapter folder. Returns {PEFT key: tensor} (the
        very tensors used by the model, so their .grad can be read)."""
        with open(os.path.join(folder, "adapter_config.json")) as f:
            acfg = json.load(f)
        if acfg.get("peft_type", "LORA") != "LORA":
            raise ValueError(f"peft_type {acfg.get('peft_type')!r} is not LORA")
        tensors = safetensors_io.load_file(os.path.join(folder, "adapter_model.safetensors"),
                                           upcast=True)
        alpha = float(acfg.get("lora_alpha", 8))
        rslora = bool(acfg.get("use_rslora", False))
        rank_pattern = acfg.get("rank_pattern") or {}
        alpha_pattern = acfg.get("alpha_pattern") or {}
        targets = acfg.get("target_modules")
        pat = re.compile(r"^base_model\.model\.(.+)\.lora_([AB])(?:\.default)?\.weight$")
        found = {}
        for key in tensors:
            m = pat.match(key)
            if not m:
                raise ValueError(f"adapter key {key!r} is not a supported LoRA weight")
            found.setdefault(m.group(1), {})[m.group(2)] = key
        params = {}
        for mod, ab in found.items():
            if set(ab) != {"A", "B"}:
                raise ValueError(f"{mod}: adapter has only lora_{''.join(ab)}")
            head = mod == "lm_head"  # PEFT adapts the LM head by that name, tied or not
            if not head and (mod + ".weight" not in self.w or ".layers." not in mod):
                raise ValueError(f"{mod}: not an adaptable linear layer of this model")
            if targets is not None and not module_targeted(mod, targets):
                raise ValueError(f"{mod} has LoRA weights but is not in target_modules")
            A = tensors[ab["A"]].to(self.dtype).contiguous()
            B = tensors[ab["B"]].to(self.dtype).contiguous()
            r = A.shape[0]
            W = self.head_weight() if head else self.w[mod + ".weight"]
            if A.shape != (r, W.shape[1]) or B.shape != (W.shape[0], r):
                raise ValueError(f"{mod}: LoRA shapes {tuple(A.shape)}, {tuple(B.shape)} "
                                 f"do not fit weight {tuple(W.shape)}")
            a = alpha
            for p, v in alpha_pattern.items():
                if re.match(rf"(.*\.)?{p}$", mod):
                    a = float(v)
            for p, v in rank_pattern.items():
                if re.match(rf"(.*\.)?{p}$", mod) and int(v) != r:
                    raise ValueError(f"{mod}: rank_pattern says {v}, tensors have {r}")
            scale = a / math.sqrt(r) if rslora else a / r
            self.lora[mod] = LoRA(A, B, scale)
            params[ab["A"]] = A
            params[ab["B"]] = B
        return params

    def add_lora(self, module_names, rank, alpha, init="peft", dropout=0.0, generator=None):
        """Create fresh LoRA weights (A kaiming-uniform(a=sqrt(5)) like PEFT,
        B zeros). Returns {PEFT key: tensor}."""
        params = {}
        for mod in module_names:
            W = self.w[mod + ".weight"]
            A = torch.empty(rank, W.shape[1], dtype=self.dtype)
            torch.nn.init.kaiming_uniform_(A, a=math.sqrt(5))
            B = torch.zeros(W.shape[0], rank, dtype=self.dtype)
            self.lora[mod] = LoRA(A, B, alpha / rank, dropout)
            params[PEFT_PREFIX + mod + ".lora_A.weight"] = A
            params[PEFT_PREFIX + mod + ".lora_B.weight"] = B
        return params

    # ---- building blocks -------------------------------------------------

    def linear(self, x, mod):
        y = F.linear(x, self.w[mod + ".weight"], self.w.get(mod + ".bias"))
        lo = self.lora.get(mod)
        if lo is not None:
            xi = x
            if self.training and lo.dropout > 0:
                xi = F.dropout(x, lo.dropout, True)
            y = y + F.linear(F.linear(xi, lo.A), lo.B) * lo.scale
        return y

    def rmsnorm(self, x, weight):
        in_dtype = x.dtype
        h = x.to(self.acc_dtype)
        var = h.pow(2).mean(-1, keepdim=True)
        h = h * torch.rsqrt(var + self.cfg.rms_norm_eps)
        return weight * h.to(in_dtype)

    def rope(self, positions):
        """cos, sin of shape (T, head_dim) computed like HF (float32), cast."""
        freqs = positions.to(self.inv_freq.dtype)[:, None] * self.inv_freq[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(self.dtype), emb.sin().to(self.dtype)

    @staticmethod
    def rotate_half(x):
        half = x.shape[-1] // 2
        return torch.cat((-x[..., half:], x[..., :half]), dim=-1)

    def attention(self, i, x, cos, sin, mask, cache):
        c = self.cfg
        B, T, _ = x.shape
        nh, nkv, hd = c.num_attention_heads, c.num_key_value_heads, c.head_dim
        p = f"model.layers.{i}.self_attn."
        q = self.linear(x, p + "q_proj").view(B, T, nh, hd).transpose(1, 2)
        k = self.linear(x, p + "k_proj").view(B, T, nkv, hd).transpose(1, 2)
        v = self.linear(x, p + "v_proj").view(B, T, nkv, hd).transpose(1, 2)
        q = q * cos + self.rotate_half(q) * sin
        k = k * cos + self.rotate_half(k) * sin
        if cache is not None:
            if cache.k[i] is not None:
                k = torch.cat((cache.k[i], k), dim=2)
                v = torch.cat((cache.v[i], v), dim=2)
            cache.k[i], cache.v[i] = k, v
        S = k.shape[2]
        rep = nh // nkv
        if rep > 1:
            k = k[:, :, None].expand(B, nkv, rep, S, hd).reshape(B, nh, S, hd)
            v = v[:, :, None].expand(B, nkv, rep, S, hd).reshape(B, nh, S, hd)
        scores = torch.matmul(q, k.transpose(2, 3)) * (hd ** -0.5)
        if mask is not None:
            scores = scores + mask
        probs = torch.softmax(scores.to(self.acc_dtype), dim=-1).to(q.dtype)
        out = torch.matmul(probs, v).transpose(1, 2).reshape(B, T, nh * hd)
        return self.linear(out, p + "o_proj")

    def mlp(self, i, x):
        p = f"model.layers.{i}.mlp."
        return self.linear(F.silu(self.linear(x, p + "gate_proj")) * self.linear(x, p + "up_proj"),
                           p + "down_proj")

    def forward(self, input_ids, cache=None):
        """input_ids (B, T) int64 -> logits (B, T, V) in the model dtype.
        With a KVCache, positions continue after the cached ones and the
        cache is extended in place."""
        c = self.cfg
        B, T = input_ids.shape
        past = cache.length if cache is not None else 0
        x = F.embedding(input_ids, self.w["model.embed_tokens.weight"])
        pos = torch.arange(past, past + T)
        cos, sin = self.rope(pos)
        mask = None
        if T > 1:
            keys = torch.arange(past + T)
            blocked = keys[None, :] > pos[:, None]  # (T, past+T)
            mask = torch.zeros(T, past + T, dtype=self.dtype)
            mask.masked_fill_(blocked, torch.finfo(self.dtype).min)
        for i in range(c.num_hidden_layers):
            p = f"model.layers.{i}."
            x = x + self.attention(i, self.rmsnorm(x, self.w[p + "input_layernorm.weight"]),
                                   cos, sin, mask, cache)
            x = x + self.mlp(i, self.rmsnorm(x, self.w[p + "post_attention_layernorm.weight"]))
        x = self.rmsnorm(x, self.w["model.norm.weight"])
        logits = F.linear(x, self.head_weight())
        lo = self.lora.get("lm_head")
        if lo is not None:
            logits = logits + F.linear(F.linear(x, lo.A), lo.B) * lo.scale
        if cache is not None:
            cache.length += T
        return logits

    __call__ = forward

    def head_weight(self):
        return self.w["model.embed_tokens.weight"] if self.tied else self.w["lm_head.weight"]

    def new_cache(self):
        return KVCache(self.cfg.num_hidden_layers)

    def base_params(self):
        return self.w

    def num_params(self):
        return sum(t.numel() for t in self.w.values()) + sum(
            lo.A.numel() + lo.B.numel() for lo in self.lora.values())


class KVCache:
    def __init__(self, n_layers):
        self.k = [None] * n_layers
        self.v = [None] * n_layers
        self.length = 0


# --------------------------------------------------------------------------
# Loss


def weighted_loss(logits, input_ids, loss_weights):
    """CE of predicting input_ids[:, t+1] from logits[:, t], weighted.
    Returns (loss scalar, token_ce (B, T-1))."""
    lg = logits[:, :-1, :]
    tgt = input_ids[:, 1:]
    logp = torch.log_softmax(lg.to(torch.float64 if logits.dtype == torch.float64
                                    else torch.float32), dim=-1)
    ce = -logp.gather(-1, tgt.unsqueeze(-1)).squeeze(-1)
    w = loss_weights.to(ce.dtype)
    denom = w.sum()
    if float(denom) == 0.0:
        return (ce * w).sum(), ce
    return (ce * w).sum() / denom, ce


def run_reference(model_dir, input_json, adapter_dir=None, dtype=torch.float32, base_grads=False):
    """Returns {name: float32 tensor} as written by the CLI."""
    model = LlamaRef.from_folder(model_dir, dtype)
    with open(input_json) as f:
        data = json.load(f)
    ids = data["input_ids"]
    if ids and not isinstance(ids[0], list):
        ids = [ids]
    input_ids = torch.tensor(ids, dtype=torch.int64)
    if input_ids.dim() != 2 or input_ids.shape[1] < 1:
        raise ValueError("input_ids must be B sequences of equal length T")
    B, T = input_ids.shape
    if int(input_ids.min()) < 0 or int(input_ids.max()) >= model.cfg.vocab_size:
        raise ValueError("input_ids out of vocabulary range")
    lw = data.get("loss_weights")
    if lw is None:
        weights = torch.ones(B, max(T - 1, 0), dtype=dtype)
    else:
        if lw and not isinstance(lw[0], list):
            lw = [lw]
        weights = torch.tensor(lw, dtype=dtype)
        if tuple(weights.shape) != (B, T - 1):
            raise ValueError(f"loss_weights shape {tuple(weights.shape)}, expected {(B, T - 1)}")
    params = {}
    if adapter_dir:
        params = model.load_adapter(adapter_dir)
        prefix = "grad."
    elif base_grads:
        params = dict(model.w)
        prefix = "grad."
    for t in params.values():
        t.requires_grad_(True)
    with torch.set_grad_enabled(bool(params)):
        logits = model(input_ids)
        loss, ce = weighted_loss(logits, input_ids, weights)
    out = {
        "logits": logits.detach().float(),
        "loss": loss.detach().float().reshape(1),
        "token_ce": ce.detach().float(),
    }
    if params:
        loss.backward()
        for name, t in params.items():
            g = t.grad if t.grad is not None else torch.zeros_like(t)
            out[prefix + name] = g.detach().float()
    return out


# --------------------------------------------------------------------------
# Self test


def _random_model(folder, cfg_dict, seed=0, with_lm_head=True, std=0.2, dtype=torch.float32,
                  shards=None):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(cfg_dict, f, indent=2)
    cfg = LlamaConfig(cfg_dict)
    g = torch.Generator().manual_seed(seed)

    def rnd(*shape):
        return (torch.randn(*shape, generator=g) * std).to(dtype)

    h, nh, nkv, hd, im = (cfg.hidden_size, cfg.num_attention_heads, cfg.num_key_value_heads,
                          cfg.head_dim, cfg.intermediate_size)
    w = {"model.embed_tokens.weight": rnd(cfg.vocab_size, h),
         "model.norm.weight": (1 + rnd(h)).to(dtype)}
    if with_lm_head:
        w["lm_head.weight"] = rnd(cfg.vocab_size, h)
    for i in range(cfg.num_hidden_layers):
        p = f"model.layers.{i}."
        w[p + "self_attn.q_proj.weight"] = rnd(nh * hd, h)
        w[p + "self_attn.k_proj.weight"] = rnd(nkv * hd, h)
        w[p + "self_attn.v_proj.weight"] = rnd(nkv * hd, h)
        w[p + "self_attn.o_proj.weight"] = rnd(h, nh * hd)
        w[p + "mlp.gate_proj.weight"] = rnd(im, h)
        w[p + "mlp.up_proj.weight"] = rnd(im, h)
        w[p + "mlp.down_proj.weight"] = rnd(h, im)
        w[p + "input_layernorm.weight"] = (1 + rnd(h)).to(dtype)
        w[p + "post_attention_layernorm.weight"] = (1 + rnd(h)).to(dtype)
        if cfg.attention_bias:
            w[p + "self_attn.q_proj.bias"] = rnd(nh * hd)
            w[p + "self_attn.k_proj.bias"] = rnd(nkv * hd)
            w[p + "self_attn.v_proj.bias"] = rnd(nkv * hd)
            w[p + "self_attn.o_proj.bias"] = rnd(h)
    if shards:
        safetensors_io.save_sharded(w, folder, shards, metadata={"format": "pt"})
    else:
        safetensors_io.save_file(w, os.path.join(folder, "model.safetensors"),
                                 metadata={"format": "pt"})
    return w


def _random_adapter(folder, model_cfg_dict, r=4, alpha=8, targets=("q_proj", "v_proj", "down_proj"),
                    seed=1, std=0.3):
    os.makedirs(folder, exist_ok=True)
    cfg = LlamaConfig(model_cfg_dict)
    g = torch.Generator().manual_seed(seed)
    model_shapes = {
        "q_proj": (cfg.num_attention_heads * cfg.head_dim, cfg.hidden_size),
        "k_proj": (cfg.num_key_value_heads * cfg.head_dim, cfg.hidden_size),
        "v_proj": (cfg.num_key_value_heads * cfg.head_dim, cfg.hidden_size),
        "o_proj": (cfg.hidden_size, cfg.num_attention_heads * cfg.head_dim),
        "gate_proj": (cfg.intermediate_size, cfg.hidden_size),
        "up_proj": (cfg.intermediate_size, cfg.hidden_size),
        "down_proj": (cfg.hidden_size, cfg.intermediate_size),
    }
    t = {}
    for i in range(cfg.num_hidden_layers):
        for short in targets:
            out_f, in_f = model_shapes[short]
            key = f"{PEFT_PREFIX}model.layers.{i}.{LINEAR_SUFFIXES[short]}"
            t[key + ".lora_A.weight"] = torch.randn(r, in_f, generator=g) * std
            t[key + ".lora_B.weight"] = torch.randn(out_f, r, generator=g) * std
    with open(os.path.join(folder, "adapter_config.json"), "w") as f:
        json.dump({"peft_type": "LORA", "r": r, "lora_alpha": alpha,
                   "target_modules": list(targets), "lora_dropout": 0.05,
                   "bias": "none", "task_type": "CAUSAL_LM", "use_rslora": False}, f, indent=2)
    safetensors_io.save_file(t, os.path.join(folder, "adapter_model.safetensors"))
    return t


def _rel(a, b):
    return float((a.double() - b.double()).abs().max() / b.double().abs().max().clamp_min(1e-30))


def selftest():
    import tempfile
    torch.manual_seed(0)
    results = []

    def check(name, ok, detail=""):
        results.append((name, ok))
        print(f"[{'PASS' if ok else 'FAIL'}] {name} {detail}")

    base_cfg = {"vocab_size": 97, "hidden_size": 32, "intermediate_size": 48,
                "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                "head_dim": 8, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
                "tie_word_embeddings": False, "model_type": "llama"}
    with tempfile.TemporaryDirectory() as tmp:
        # 0. safetensors round trip of every dtype
        st = {"f32": torch.randn(3, 4), "f16": torch.randn(5).half(),
              "bf16": torch.randn(2, 3).bfloat16(), "i64": torch.arange(6).reshape(2, 3),
              "i32": torch.arange(4, dtype=torch.int32), "f64": torch.randn(2).double(),
              "empty": torch.zeros(0, 3), "scalar": torch.tensor(2.5)}
        p = os.path.join(tmp, "rt.safetensors")
        safetensors_io.save_file(st, p, metadata={"k": "v"})
        back = safetensors_io.load_file(p)
        hdr, meta, start = safetensors_io.read_header(p)
        ok = all(back[k].dtype == v.dtype and back[k].shape == v.shape and torch.equal(back[k], v)
                 for k, v in st.items()) and meta == {"k": "v"} and start % 8 == 0
        up = safetensors_io.load_file(p, upcast=True)
        ok = ok and up["bf16"].dtype == torch.float32 and torch.equal(up["bf16"], st["bf16"].float())
        check("safetensors round trip (F64/F32/F16/BF16/I64/I32, empty, scalar, metadata)", ok)

        mdir = os.path.join(tmp, "model")
        w = _random_model(mdir, base_cfg)
        model32 = LlamaRef.from_folder(mdir, torch.float32)
        model64 = LlamaRef.from_folder(mdir, torch.float64)
        g = torch.Generator().manual_seed(3)
        ids = torch.randint(0, 97, (2, 12), generator=g)

        # (a) causality
        with torch.no_grad():
            l1 = model32(ids)
            ids2 = ids.clone()
            ids2[:, 7] = (ids2[:, 7] + 5) % 97
            l2 = model32(ids2)
        d_before = float((l1[:, :7] - l2[:, :7]).abs().max())
        d_after = float((l1[:, 7:] - l2[:, 7:]).abs().max())
        check("(a) causal: changing token 7 leaves logits 0..6 unchanged",
              d_before == 0.0 and d_after > 1e-3, f"max diff before={d_before:.3g} after={d_after:.3g}")

        # (b) float32 vs float64
        with torch.no_grad():
            l64 = model64(ids)
        r = _rel(l1, l64)
        check("(b) float32 vs float64 logits agree to 1e-5 relative", r < 1e-5, f"rel={r:.3g}")

        # sharded checkpoint loads identically
        sdir = os.path.join(tmp, "sharded")
        _random_model(sdir, base_cfg, shards=20000)
        nshards = len([f for f in os.listdir(sdir) if f.endswith(".safetensors")])
        ws = safetensors_io.load_checkpoint(sdir)
        ok = nshards > 1 and set(ws) == set(w) and all(torch.equal(ws[k], w[k]) for k in w)
        check("sharded checkpoint (index.json weight_map) loads identically", ok, f"{nshards} shards")

        # bf16 checkpoint is upcast
        bdir = os.path.join(tmp, "bf16")
        wb = _random_model(bdir, base_cfg, dtype=torch.bfloat16)
        mb = LlamaRef.from_folder(bdir)
        ok = mb.w["model.norm.weight"].dtype == torch.float32 and torch.equal(
            mb.w["model.norm.weight"], wb["model.norm.weight"].float())
        check("bf16 checkpoint is upcast to float32", ok)

        # (c) LoRA gradients vs central finite differences in float64
        adir = os.path.join(tmp, "adapter")
        _random_adapter(adir, base_cfg)
        m = LlamaRef.from_folder(mdir, torch.float64)
        params = m.load_adapter(adir)
        lw = torch.rand(2, 11, generator=g, dtype=torch.float64)
        lw[0, :3] = 0
        for t in params.values():
            t.requires_grad_(True)
        loss, _ = weighted_loss(m(ids), ids, lw)
        loss.backward()
        worst = 0.0
        checked = 0
        for key in [f"{PEFT_PREFIX}model.layers.0.self_attn.q_proj.lora_A.weight",
                    f"{PEFT_PREFIX}model.layers.1.self_attn.v_proj.lora_B.weight",
                    f"{PEFT_PREFIX}model.layers.0.mlp.down_proj.lora_A.weight",
                    f"{PEFT_PREFIX}model.layers.1.mlp.down_proj.lora_B.weight"]:
            t = params[key]
            for idx in [(0, 0), (1, 3), (t.shape[0] - 1, t.shape[1] - 1)]:
                eps = 1e-6
                with torch.no_grad():
                    orig = t[idx].item()
                    t[idx] = orig + eps
                    lp = weighted_loss(m(ids), ids, lw)[0].item()
                    t[idx] = orig - eps
                    lm = weighted_loss(m(ids), ids, lw)[0].item()
                    t[idx] = orig
                fd = (lp - lm) / (2 * eps)
                an = t.grad[idx].item()
                err = abs(fd - an) / max(abs(an), 1e-8)
                worst = max(worst, err)
                checked += 1
        check("(c) LoRA grads match finite differences (float64)", worst < 1e-5,
              f"{checked} entries, worst rel err={worst:.3g}")

        # LoRA delta equals merging B@A*scale into the base weight
        with torch.no_grad():
            lo_logits = m(ids)
            merged = dict(m.w)
            for mod, lo in m.lora.items():
                merged[mod + ".weight"] = m.w[mod + ".weight"] + lo.B @ lo.A * lo.scale
            mm = LlamaRef(m.cfg, merged, torch.float64)
            r = _rel(lo_logits, mm(ids))
        check("LoRA forward equals merged weights W + B A alpha/r", r < 1e-10, f"rel={r:.3g}")

        # (d) tied vs untied embeddings
        tdir = os.path.join(tmp, "tied")
        tied_cfg = dict(base_cfg, tie_word_embeddings=True)
        wt = _random_model(tdir, tied_cfg, with_lm_head=False)
        mt = LlamaRef.from_folder(tdir)
        # the same weights, untied, with lm_head = embed copy
        udir = os.path.join(tmp, "untied")
        os.makedirs(udir)
        with open(os.path.join(udir, "config.json"), "w") as f:
            json.dump(base_cfg, f)
        wu = dict(wt)
        wu["lm_head.weight"] = wt["model.embed_tokens.weight"].clone()
        safetensors_io.save_file(wu, os.path.join(udir, "model.safetensors"))
        mu = LlamaRef.from_folder(udir)
        # untied config but lm_head missing -> falls back to embed
        fdir = os.path.join(tmp, "fallback")
        os.makedirs(fdir)
        with open(os.path.join(fdir, "config.json"), "w") as f:
            json.dump(base_cfg, f)
        safetensors_io.save_file(wt, os.path.join(fdir, "model.safetensors"))
        mf = LlamaRef.from_folder(fdir)
        with torch.no_grad():
            lt, lu, lf = mt(ids), mu(ids), mf(ids)
            # untied with a different lm_head differs
            wu2 = dict(wu)
            wu2["lm_head.weight"] = wu["lm_head.weight"] * 2
            l2 = LlamaRef(LlamaConfig(base_cfg), wu2)(ids)
        ok = (mt.tied and not mu.tied and mf.tied and torch.allclose(lt, lu, atol=1e-6)
              and torch.equal(lt, lf) and not torch.allclose(l2, lu))
        check("(d) tied (no lm_head) == untied (lm_head = embed copy); missing lm_head ties", ok)

        # tied + base grads: lm_head gradient lands in embed_tokens
        inp = os.path.join(tmp, "in.json")
        with open(inp, "w") as f:
            json.dump({"input_ids": ids.tolist(), "loss_weights": lw.tolist()}, f)
        out = run_reference(tdir, inp, dtype=torch.float64, base_grads=True)
        ok = "grad.model.embed_tokens.weight" in out and "grad.lm_head.weight" not in out
        ok = ok and len([k for k in out if k.startswith("grad.")]) == len(wt)
        check("--base-grads with tied embeddings: one grad per stored weight", ok)

        # (e) KV-cache path equals the full forward
        with torch.no_grad():
            full = model64(ids)
            cache = model64.new_cache()
            parts = [model64(ids[:, :5], cache)]
            for t in range(5, 12):
                parts.append(model64(ids[:, t:t + 1], cache))
            cached = torch.cat(parts, dim=1)
        r = _rel(cached, full)
        check("(e) KV-cache incremental logits == full forward", r < 1e-12 and cache.length == 12,
              f"rel={r:.3g}")

        # (f) GQA equals MHA with duplicated kv heads; attention bias; rope scaling run
        cfg_mha = dict(base_cfg, num_key_value_heads=4)
        wm = dict(w)
        for i in range(2):
            for n in ("k_proj", "v_proj"):
                key = f"model.layers.{i}.self_attn.{n}.weight"
                wk = w[key].view(2, 8, 32)
                wm[key] = wk[:, None].expand(2, 2, 8, 32).reshape(32, 32)
        with torch.no_grad():
            r = _rel(LlamaRef(LlamaConfig(cfg_mha), wm, torch.float64)(ids), l64)
        check("(f) GQA == MHA with repeated kv heads (head h uses kv h // rep)", r < 1e-12,
              f"rel={r:.3g}")

        bias_cfg = dict(base_cfg, attention_bias=True,
                        rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                      "high_freq_factor": 4.0,
                                      "original_max_position_embeddings": 8})
        bdir2 = os.path.join(tmp, "bias")
        _random_model(bdir2, bias_cfg)
        with torch.no_grad():
            lb = LlamaRef.from_folder(bdir2)(ids)
        check("attention_bias + llama3 rope_scaling model runs", bool(torch.isfinite(lb).all()))

        # CLI end to end
        outp = os.path.join(tmp, "out.safetensors")
        rc = main(["--model", mdir, "--adapter", adir, "--input", inp, "--out", outp,
                   "--float64", "--threads", "1"])
        o = safetensors_io.load_file(outp)
        ok = (rc == 0 and o["logits"].dtype == torch.float32 and tuple(o["logits"].shape) == (2, 12, 97)
              and tuple(o["loss"].shape) == (1,)
              and abs(float(o["loss"]) - loss.item()) < 1e-6
              and all(("grad." + k) in o for k in params)
              and torch.allclose(o[f"grad.{PEFT_PREFIX}model.layers.0.self_attn.q_proj.lora_A.weight"],
                                 params[f"{PEFT_PREFIX}model.layers.0.self_attn.q_proj.lora_A.weight"]
                                 .grad.float(), rtol=1e-5, atol=1e-7))
        check("CLI writes logits/loss/grad.* matching the in-process values", ok)

    nfail = sum(1 for _, ok in results if not ok)
    print(f"selftest: {len(results) - nfail}/{len(results)} passed")
    return 1 if nfail else 0


# --------------------------------------------------------------------------
# CLI


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", help="HF model folder (config.json + safetensors)")
    ap.add_argument("--adapter", help="PEFT LoRA adapter folder")
    ap.add_argument("--input", help="IN.json with input_ids and loss_weights")
    ap.add_argument("--out", help="OUT.safetensors")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch default)")
    ap.add_argument("--float64", action="store_true", help="compute in float64")
    ap.add_argument("--base-grads", action="store_true",
                    help="without --adapter: also write grad.<HF name> of all base weights")
    ap.add_argument("--selftest", action="store_true", help="run the built-in self checks")
    a = ap.parse_args(argv)
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    if a.selftest:
        return selftest()
    if not (a.model and a.input and a.out):
        ap.error("--model, --input and --out are required (or --selftest)")
    dtype = torch.float64 if a.float64 else torch.float32
    out = run_reference(a.model, a.input, a.adapter, dtype, a.base_grads)
    safetensors_io.save_file(out, a.out, metadata={"producer": "burst tests/reference/llama_ref.py"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
