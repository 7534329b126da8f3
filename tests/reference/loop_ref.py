#!/usr/bin/python3
"""Float64 references for a training loop session's losses and optimizer.

Written from the definitions (docs/loops.md, "Data and losses"), independently of
Burst's C++: src/train/loop_run_test.cpp writes an input JSON, runs this
with the project's .venv and compares.

  loop_ref.py losses IN.json OUT.json
      IN: {"cases": [{"loss_fn", "config": {...}, "lp": [...], "inputs": {name: [...]}}]}
      OUT: {"cases": [{"loss": [...] per token, "grad": [...] d sum(loss) / d lp}]}

  loop_ref.py adamw IN.json OUT.json
      IN: {"params": {name: {"shape", "data"}}, "steps": [{"adam": {...}, "grads": {name: data}}]}
      runs torch.optim.AdamW with torch.nn.utils.clip_grad_norm_ (when
      grad_clip_norm > 0), one optimizer for all steps, hyperparameters set
      per step as the session does;
      OUT: {"params": {name: data}} after the last step.
"""
import json
import sys

import torch

torch.set_default_dtype(torch.float64)


def token_loss(fn, cfg, lp, inp):
    if fn == "cross_entropy":
        return -inp["weights"] * lp
    q, adv = inp["logprobs"], inp["advantages"]
    if fn == "dro":
        return -(lp * adv - cfg["beta"] / 2 * (lp - q) ** 2)
    ratio = torch.exp(lp - q)
    if fn == "importance_sampling":
        return -(ratio * adv)
    lo = inp.get("clip_low_threshold", torch.full_like(lp, cfg["clip_low_threshold"]))
    hi = inp.get("clip_high_threshold", torch.full_like(lp, cfg["clip_high_threshold"]))
    clipped = torch.minimum(torch.maximum(ratio, lo), hi)
    if fn == "ppo":
        return -torch.minimum(ratio * adv, clipped * adv)
    if fn == "cispo":
        return -(clipped.detach() * lp * adv)
    raise ValueError(f"unknown loss {fn}")


def losses(cases):
    out = []
    for c in cases:
        lp = torch.tensor(c["lp"], requires_grad=True)
        inp = {k: torch.tensor(v) for k, v in c["inputs"].items()}
        loss = token_loss(c["loss_fn"], c.get("config", {}), lp, inp)
        loss.sum().backward()
        out.append({"loss": loss.detach().tolist(), "grad": lp.grad.tolist()})
    return {"cases": out}


def adamw(spec):
    names = sorted(spec["params"])
    params = {n: torch.tensor(spec["params"][n]["data"]).reshape(spec["params"][n]["shape"]).requires_grad_()
              for n in names}
    opt = torch.optim.AdamW([params[n] for n in names], lr=1e-4, betas=(0.9, 0.95), eps=1e-12,
                            weight_decay=0.0)
    for step in spec["steps"]:
        a = step["adam"]
        for g in opt.param_groups:
            g["lr"], g["betas"], g["eps"], g["weight_decay"] = (
                a["learning_rate"], (a["beta1"], a["beta2"]), a["eps"], a["weight_decay"])
        for n in names:
            params[n].grad = torch.tensor(step["grads"][n]).reshape(params[n].shape)
        if a["grad_clip_norm"] > 0:
            torch.nn.utils.clip_grad_norm_([params[n] for n in names], a["grad_clip_norm"])
        opt.step()
    return {"params": {n: params[n].detach().reshape(-1).tolist() for n in names}}


def main():
    mode, src, dst = sys.argv[1:4]
    with open(src) as f:
        spec = json.load(f)
    result = losses(spec["cases"]) if mode == "losses" else adamw(spec)
    with open(dst, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
