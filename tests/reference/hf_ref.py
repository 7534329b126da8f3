#!/usr/bin/env python3
"""Hugging Face transformers + PEFT as the judge of Burst's forward, loss and
gradients, and the maker of the models Burst loads.

  .venv/bin/python tests/reference/hf_ref.py make --config CONFIG.json --out DIR
      [--seed S] [--dtype float32|bfloat16] [--max-shard-size SIZE]
      [--adapter-out DIR --lora-r R --lora-alpha A --targets q_proj,v_proj]
  .venv/bin/python tests/reference/hf_ref.py run --model DIR [--adapter DIR]
      --input IN.json --out OUT.safetensors [--threads N] [--base-grads]
  .venv/bin/python tests/reference/hf_ref.py serve

make: a randomly initialised model of CONFIG (a config.json's fields;
"model_type" picks the family) built by transformers' own from_config and
written by save_pretrained (safetensors, sharded past --max-shard-size); with
--adapter-out also a PEFT LoRA adapter (get_peft_model + save_pretrained)
whose B is random too, so that it changes the logits.

run: loads the folder with AutoModelForCausalLM.from_pretrained in float32
(eager attention) and the adapter, if any, with PeftModel.from_pretrained;
writes what tests/reference/llama_ref.py writes, under the same names:
logits (B, T, V), loss [1] = sum(w * CE) / sum(w), token_ce (B, T-1), and
grad.<PEFT key> of every LoRA tensor (with --adapter) or grad.<HF name> of
every base weight (--base-grads; a mixture of experts' weights one by one,
as its checkpoint files name them), and route.<i>, the experts the i-th
mixture-of-experts layer's router picked per token (tokens, k). IN.json: {"input_ids": [[...]],
"loss_weights": [[...]]}, loss_weights (B, T-1), default all ones.

serve: one process for many commands (importing torch and transformers
takes seconds): each line of standard input is a JSON array of one command's
arguments ("make ..." or "run ..."); each gets one line on standard output,
{"ok": true} or {"ok": false, "error": "..."}. Everything else the libraries
print goes to standard error. Ends at the end of its input.
"""

import argparse
import json
import os
import sys
import traceback

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import torch  # noqa: E402
from safetensors.torch import save_file  # noqa: E402


def make(a):
    import transformers
    with open(a.config) as f:
        fields = json.load(f)
    model_type = fields.pop("model_type", "llama")
    config = transformers.AutoConfig.for_model(model_type, **fields)
    torch.manual_seed(a.seed)
    model = transformers.AutoModelForCausalLM.from_config(config, torch_dtype=torch.float32)
    # from_config's init is tiny (std 0.02): widen it so that every layer
    # moves the logits, as a trained model's do.
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() >= 2:
                p.normal_(0.0, a.std)
            elif "norm" in name:
                p.uniform_(0.5, 1.5)
    dtype = getattr(torch, a.dtype)
    model.to(dtype).save_pretrained(a.out, max_shard_size=a.max_shard_size, safe_serialization=True)
    if a.adapter_out:
        import peft
        lora = peft.LoraConfig(r=a.lora_r, lora_alpha=a.lora_alpha, target_modules=a.targets.split(","),
                               lora_dropout=0.0, bias="none", task_type="CAUSAL_LM")
        pm = peft.get_peft_model(model.float(), lora)
        with torch.no_grad():
            for name, p in pm.named_parameters():
                if "lora_B" in name:
                    p.normal_(0.0, 0.1)
        pm.save_pretrained(a.adapter_out)
    return 0


def weighted_loss(logits, input_ids, weights):
    logp = torch.log_softmax(logits[:, :-1, :].float(), dim=-1)
    ce = -logp.gather(-1, input_ids[:, 1:].unsqueeze(-1)).squeeze(-1)
    denom = weights.sum()
    loss = (ce * weights).sum() if float(denom) == 0.0 else (ce * weights).sum() / denom
    return loss, ce


def peft_key(name):
    # Parameter "base_model.model.X.lora_A.default.weight" is saved as
    # "base_model.model.X.lora_A.weight" (the adapter's name dropped).
    return name.replace(".lora_A.default.", ".lora_A.").replace(".lora_B.default.", ".lora_B.")


def checkpoint_grads(model_type, name, grad):
    """A gradient under the names of the model's checkpoint files: transformers
    5 holds a mixture of experts' weights fused ("mlp.experts.gate_up_proj",
    (E, 2F, C)) where its files, and Burst, keep one tensor per expert."""
    mixtral = model_type == "mixtral"
    moe = ".block_sparse_moe." if mixtral else ".mlp."
    names = {"gate": "w1", "up": "w3", "down": "w2"} if mixtral else {
        "gate": "gate_proj", "up": "up_proj", "down": "down_proj"}
    if name.endswith(".mlp.experts.gate_up_proj") or name.endswith(".mlp.experts.down_proj"):
        prefix = name[: name.index(".mlp.experts.")] + moe + "experts."
        out = {}
        for e in range(grad.shape[0]):
            if name.endswith("gate_up_proj"):
                gate, up = grad[e].chunk(2, dim=0)
                out[prefix + "%d.%s.weight" % (e, names["gate"])] = gate
                out[prefix + "%d.%s.weight" % (e, names["up"])] = up
            else:
                out[prefix + "%d.%s.weight" % (e, names["down"])] = grad[e]
        return out
    if mixtral and name.endswith(".mlp.gate.weight"):
        return {name.replace(".mlp.gate.", moe + "gate."): grad}
    return {name: grad}


def run(a):
    import transformers
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    model = transformers.AutoModelForCausalLM.from_pretrained(a.model, torch_dtype=torch.float32,
                                                              attn_implementation="eager")
    model.eval()
    with open(a.input) as f:
        data = json.load(f)
    input_ids = torch.tensor(data["input_ids"], dtype=torch.int64)
    B, T = input_ids.shape
    lw = data.get("loss_weights")
    weights = torch.ones(B, T - 1) if lw is None else torch.tensor(lw, dtype=torch.float32)
    params = {}
    if a.adapter:
        import peft
        model = peft.PeftModel.from_pretrained(model, a.adapter, is_trainable=True)
        model.eval()
        params = {peft_key(n): p for n, p in model.named_parameters() if "lora_" in n}
    else:
        for p in model.parameters():
            p.requires_grad_(a.base_grads)
        if a.base_grads:
            # Tied embeddings are one Parameter: its gradient holds the head's.
            params = {n: p for n, p in model.named_parameters(remove_duplicate=True)}
    # The experts each mixture-of-experts layer's router picks, in layer order.
    routes = []
    for mod_name, mod in model.named_modules():
        if mod_name.endswith("mlp.gate") and hasattr(mod, "top_k"):
            mod.register_forward_hook(lambda _m, _in, out: routes.append(out[2].detach()))
    with torch.set_grad_enabled(bool(params)):
        logits = model(input_ids=input_ids, use_cache=False).logits
        loss, ce = weighted_loss(logits, input_ids, weights)
    out = {"logits": logits.detach().float().contiguous(), "loss": loss.detach().float().reshape(1),
           "token_ce": ce.detach().float().contiguous()}
    for i, r in enumerate(routes):
        out["route.%d" % i] = r.to(torch.int64).contiguous()
    if params:
        loss.backward()
        model_type = model.config.model_type
        for name, p in params.items():
            g = p.grad if p.grad is not None else torch.zeros_like(p)
            for key, part in checkpoint_grads(model_type, name, g.detach().float()).items():
                out["grad." + key] = part.contiguous()
    save_file(out, a.out, metadata={"producer": "burst tests/reference/hf_ref.py",
                                    "transformers": transformers.__version__})
    return 0


def serve():
    replies = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # the libraries' prints stay out of the replies
    sys.stdout = sys.stderr
    for line in sys.stdin:
        try:
            argv = json.loads(line)
            rc = main([str(x) for x in argv])
            reply = {"ok": rc == 0} if rc == 0 else {"ok": False, "error": "exit %s" % rc}
        except SystemExit as e:  # argparse's errors
            reply = {"ok": False, "error": "exit %s: %s" % (e.code, line.strip())}
        except Exception:  # noqa: BLE001: the caller reads it
            reply = {"ok": False, "error": traceback.format_exc()}
        replies.write(json.dumps(reply) + "\n")
        replies.flush()
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make")
    m.add_argument("--config", required=True)
    m.add_argument("--out", required=True)
    m.add_argument("--seed", type=int, default=0)
    m.add_argument("--std", type=float, default=0.2)
    m.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    m.add_argument("--max-shard-size", default="5GB")
    m.add_argument("--adapter-out")
    m.add_argument("--lora-r", type=int, default=4)
    m.add_argument("--lora-alpha", type=float, default=8)
    m.add_argument("--targets", default="q_proj,v_proj,down_proj")
    r = sub.add_parser("run")
    r.add_argument("--model", required=True)
    r.add_argument("--adapter")
    r.add_argument("--input", required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--threads", type=int, default=0)
    r.add_argument("--base-grads", action="store_true")
    sub.add_parser("serve")
    a = ap.parse_args(argv)
    if a.cmd == "serve":
        return serve()
    return make(a) if a.cmd == "make" else run(a)


if __name__ == "__main__":
    sys.exit(main())
