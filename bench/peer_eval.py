"""The padding peer's evaluation (bench/peer_padded.py --eval): the metrics
Burst's trainer reports for a recipe's valid_file (src/train/eval.h),
computed as a PyTorch user of Hugging Face's Trainer would on the CPU:

  loss, token accuracy  Trainer.evaluate(): batches of the recipe's batch
                        size padded to their longest example, the LM head
                        over every position, cross-entropy and argmax hits on
                        the label tokens;
  exact match           generate(do_sample=False) on batches of prompts,
                        left-padded, with the KV cache and the last
                        position's logits only, up to the longest completion
                        + 4 tokens, a finished row fed padding until the
                        whole batch is done; a hit when the tokens before the
                        stop id equal the completion's (Burst compares the
                        decoded, trimmed text);
  label accuracy        every label scored after every prompt, the batch's
                        examples x labels as one padded batch, the LM head
                        over every position (log-softmax at the labels'
                        positions only); the likeliest label hits when it
                        is the example's own (when 2..32 distinct labels,
                        each seen twice on average, as Burst).

The examples come from `burst_bench batches --eval-out` (Burst's own tokens),
so both sides evaluate the same ids.
"""

import json

import torch
import torch.nn.functional as F


def load_examples(path):
    """(stop_ids, examples) from burst_bench batches --eval-out."""
    with open(path) as f:
        stop_ids = json.loads(f.readline())["stop_ids"]
        return stop_ids, [json.loads(line) for line in f]


def _pad_right(seqs):
    longest = max(len(s) for s in seqs)
    out = torch.zeros(len(seqs), longest, dtype=torch.long)
    for i, s in enumerate(seqs):
        out[i, :len(s)] = torch.tensor(s)
    return out


def _forward_at(model, ids, pos, mask, cache):
    """Logits of the last position (B, V): ids (B, T) at positions pos (B, T),
    mask (B, 1, T, S) additive, keys cached in `cache` (llama_ref.KVCache)."""
    x = F.embedding(ids, model.w["model.embed_tokens.weight"])
    freqs = pos.to(model.inv_freq.dtype)[..., None] * model.inv_freq          # (B, T, D/2)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos().to(model.dtype)[:, None], emb.sin().to(model.dtype)[:, None]  # (B, 1, T, D)
    for i in range(model.cfg.num_hidden_layers):
        p = f"model.layers.{i}."
        x = x + model.attention(i, model.rmsnorm(x, model.w[p + "input_layernorm.weight"]), cos, sin, mask, cache)
        x = x + model.mlp(i, model.rmsnorm(x, model.w[p + "post_attention_layernorm.weight"]))
    x = model.rmsnorm(x[:, -1], model.w["model.norm.weight"])
    logits = F.linear(x, model.head_weight())
    lo = model.lora.get("lm_head")
    if lo is not None:
        logits = logits + F.linear(F.linear(x, lo.A), lo.B) * lo.scale
    return logits


def greedy(model, prompts, stop_ids, max_new):
    """Greedy completions of a batch of prompts, left-padded, stop id dropped."""
    neg = torch.finfo(model.dtype).min
    b, longest = len(prompts), max(len(p) for p in prompts)
    ids = torch.zeros(b, longest, dtype=torch.long)
    real = torch.zeros(b, longest, dtype=torch.bool)
    for i, p in enumerate(prompts):
        ids[i, longest - len(p):] = torch.tensor(p)
        real[i, longest - len(p):] = True
    pos = (real.long().cumsum(1) - 1).clamp(min=0)                                  # (B, T)
    causal = torch.ones(longest, longest, dtype=torch.bool).tril()
    mask = torch.zeros(b, 1, longest, longest, dtype=model.dtype)
    # A padding query sees itself, so that no row is all -inf (NaNs would
    # reach the cache through the next layer's keys).
    see = (causal[None] & real[:, None, :]) | torch.eye(longest, dtype=torch.bool)[None]
    mask.masked_fill_(~see[:, None], neg)
    cache = model.new_cache()
    logits = _forward_at(model, ids, pos, mask, cache)
    keys = real
    nxt = pos[:, -1] + 1
    out = [[] for _ in range(b)]
    done = torch.zeros(b, dtype=torch.bool)
    for step in range(max_new):
        tok = logits.argmax(-1)                                                    # (B)
        for i in range(b):
            if not done[i]:
                t = int(tok[i])
                if t in stop_ids:
                    done[i] = True
                else:
                    out[i].append(t)
        if bool(done.all()) or step + 1 == max_new:
            break
        tok = torch.where(done, torch.zeros_like(tok), tok)
        keys = torch.cat((keys, torch.ones(b, 1, dtype=torch.bool)), dim=1)
        mask = torch.zeros(b, 1, 1, keys.shape[1], dtype=model.dtype).masked_fill_(~keys[:, None, None], neg)
        logits = _forward_at(model, tok[:, None], nxt[:, None], mask, cache)
        nxt = nxt + 1
    return out


def evaluate(model, stop_ids, examples, batch_size, max_labels=32):
    """Burst's eval metrics ({"eval_loss", ...}) for the examples."""
    with torch.no_grad():
        nll = hits = count = 0.0
        for s in range(0, len(examples), batch_size):
            some = [e for e in examples[s:s + batch_size] if len(e["ids"]) >= 2]
            if not some:
                continue
            inp = _pad_right([e["ids"] for e in some])
            w = torch.zeros(inp.shape)
            for i, e in enumerate(some):
                w[i, :len(e["weights"])] = torch.tensor(e["weights"])
            logits = model(inp)[:, :-1].float()                                    # (B, T-1, V)
            tgt, wt = inp[:, 1:], w[:, 1:]
            logp = torch.log_softmax(logits, -1).gather(-1, tgt[..., None])[..., 0]
            nll -= float((logp * wt).sum())
            hits += float(((logits.argmax(-1) == tgt).float() * wt).sum())
            count += float(wt.sum())
        res = {"eval_loss": nll / count if count else 0.0, "eval_token_acc": hits / count if count else 0.0,
               "eval_exact_match": None, "eval_label_acc": None}

        done = [e for e in examples if e["prompt"] and e["completion"]]
        if not done:
            return res
        stops = list(stop_ids) + [done[0]["completion"][-1]]
        longest = max(len(e["completion"]) for e in done)
        exact = 0
        for s in range(0, len(done), batch_size):
            some = done[s:s + batch_size]
            got = greedy(model, [e["prompt"] for e in some], stops, longest + 4)
            exact += sum(g == e["completion"][:-1] for g, e in zip(got, some))
        res["eval_exact_match"] = exact / len(done)

        labels = []
        for e in done:
            if e["completion"] not in labels:
                labels.append(e["completion"])
        k = len(labels)
        if 2 <= k <= max_labels and 2 * k <= len(done):
            right = 0
            for s in range(0, len(done), batch_size):
                some = done[s:s + batch_size]
                seqs = [e["prompt"] + lab for e in some for lab in labels]
                inp = _pad_right(seqs)
                logits = model(inp)                                                # (B*K, T, V)
                scores = torch.zeros(len(seqs))
                for r, (e, lab) in enumerate((e, lab) for e in some for lab in labels):
                    at = len(e["prompt"])  # log_softmax at the label's positions only
                    logp = torch.log_softmax(logits[r, at - 1:at - 1 + len(lab)].float(), -1)
                    scores[r] = logp.gather(-1, torch.tensor(lab)[:, None]).sum()
                best = scores.view(len(some), k).argmax(1)
                right += sum(labels[int(j)] == e["completion"] for j, e in zip(best, some))
            res["eval_label_acc"] = right / len(done)
        return res
