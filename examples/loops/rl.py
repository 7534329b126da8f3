"""RL on the support-ticket task: the reward is the right label.

Each step saves the current weights as a new sampler, draws a group of
answers for each of a batch of tickets from it, scores them (1 for the
right label, else 0), centres the rewards within each group (the
advantages), and trains on the sampled tokens with an importance-sampling
(or PPO) loss, the sampler's logprobs as the behaviour policy's;
forward_backward and optim_step are pipelined. Prints the mean reward of the
answers drawn, the policy's own expected reward (its probability of the right
label) and the held-out label accuracy.

The shipped base model was never taught to answer in labels, so free-form
samples from it are almost never a label (a reward of 0 everywhere, nothing
to learn from). By default the policy's actions are therefore the six
labels: the sampler's log-probability of each label's tokens
(compute_logprobs), over a temperature, is the policy; answers are drawn
from it, and the loss raises the logprobs of the rewarded ones. The base
model scores the labels 4-13 nats apart whatever the ticket, so at
temperature 1 it always answers the same label and the policy gradient
vanishes; at the default 10 every label gets drawn, and the temperature's
policy sharpens as the scores come to depend on the ticket. Drawing is free
(the labels are scored once a ticket and a group's repeated answers merge
into one datum), so the default group of 64 answers makes the gradient
nearly its expectation. The learning rate decays linearly to 0 over the
run (constant, the policy kept flipping from one favourite label to
another). --actions free samples free-form completions instead.

    BURST_URL=... BURST_API_KEY=... .venv/bin/python examples/loops/rl.py [--steps 120]
"""
import argparse
import math
import random
import time

from common import LABELS, Loop, Task, tickets, types


def label_groups(task, sampler, batch, group, rng, temperature, explore):
    """Per ticket, `group` labels drawn from the sampler's distribution over the six
    (softmax of its logprobs of each label's tokens / temperature), mixed with a
    uniform pick `explore` of the time: [(prompt, [(tokens, logprobs, reward)])]."""
    out, expected = [], []
    prompts = [task.prompt(t) for t in batch]
    # Every request of the step goes out before any result is read.
    pending = [{label: sampler.compute_logprobs(types.ModelInput.from_ints(p + task.label_tokens[label]))
                for label in LABELS} for p in prompts]
    for ticket, prompt, futures in zip(batch, prompts, pending):
        per_label = {label: f.result()[len(prompt):] for label, f in futures.items()}
        scores = {label: sum(lp) for label, lp in per_label.items()}
        top = max(scores.values())
        policy = [math.exp((scores[label] - top) / temperature) for label in LABELS]
        total = sum(policy)
        weights = [(1 - explore) * p / total + explore / len(LABELS) for p in policy]
        right = task.label(ticket)
        picks = rng.choices(LABELS, weights=weights, k=group)
        out.append((prompt, [(task.label_tokens[x], per_label[x], 1.0 if x == right else 0.0) for x in picks]))
        expected.append(policy[LABELS.index(right)] / total)  # the policy's own expected reward
    return out, sum(expected) / len(expected)


def free_groups(task, sampler, batch, group, params):
    """Per ticket, `group` free-form completions; reward 1 for exactly the right label."""
    prompts = [task.prompt(t) for t in batch]
    futures = [sampler.sample(types.ModelInput.from_ints(p), num_samples=group, sampling_params=params)
               for p in prompts]
    out = []
    for ticket, prompt, fut in zip(batch, prompts, futures):
        want = task.label_tokens[task.label(ticket)]
        out.append((prompt, [(s.tokens, s.logprobs, 1.0 if s.tokens == want else 0.0) for s in fut.result().sequences]))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="burst-small")
    ap.add_argument("--steps", type=int, default=120)
    ap.add_argument("--batch", type=int, default=16, help="tickets per step")
    ap.add_argument("--group", type=int, default=64, help="answers per ticket")
    ap.add_argument("--lr", type=float, default=4e-3, help="the first step's; --schedule linear decays it to 0")
    ap.add_argument("--schedule", default="linear", choices=["linear", "constant"])
    ap.add_argument("--explore", type=float, default=0.0, help="share of uniformly random labels (labels)")
    ap.add_argument("--temperature", type=float, default=10.0,
                    help="of the label policy (labels: softmax of the label logprobs / temperature)")
    ap.add_argument("--rank", type=int, default=8)
    ap.add_argument("--loss", default="importance_sampling", choices=["importance_sampling", "ppo"])
    ap.add_argument("--eval", type=int, default=48, help="held-out tickets scored")
    ap.add_argument("--eval-every", type=int, default=10, help="steps between held-out scores")
    ap.add_argument("--warmup-sft", type=int, default=0, help="supervised steps first (0: pure RL)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--actions", default="labels", choices=["labels", "free"],
                    help="labels: the policy picks one of the six labels, with the sampler's own probabilities; "
                         "free: free-form completions (for models that already answer in labels)")
    args = ap.parse_args()
    rng = random.Random(args.seed)

    loop = Loop()
    tc = loop.service.create_lora_training_client(base_model=args.model, rank=args.rank, seed=args.seed).result()
    task = Task(loop.tokenizer(args.model))
    train, held_out = tickets("train"), tickets("valid", args.eval)
    print(f"run {tc.model_id}: {args.steps} steps of {args.batch} tickets x {args.group} samples, "
          f"loss {args.loss}, lr {args.lr}")
    print(f"step {0:>3}  reward     -  held-out label acc {task.label_accuracy(tc, held_out):.4f}  (the base model)")

    for _ in range(args.warmup_sft):
        tc.forward_backward([task.sft_datum(t) for t in rng.sample(train, args.batch)], "cross_entropy")
        tc.optim_step(types.AdamParams(learning_rate=args.lr))

    params = types.SamplingParams(max_tokens=6, temperature=1.0, stop=[task.end_of_turn])
    recent = []  # each step's mean reward (one step's is noisy: 16 tickets)
    for step in range(1, args.steps + 1):
        t0 = time.monotonic()
        sampler = tc.save_weights_and_get_sampling_client().result()  # the current weights
        batch = rng.sample(train, args.batch)
        policy_reward = None
        if args.actions == "labels":
            groups, policy_reward = label_groups(task, sampler, batch, args.group, rng, args.temperature, args.explore)
        else:
            groups = free_groups(task, sampler, batch, args.group, params)
        t2 = time.monotonic()
        data, rewards = [], []
        for prompt, samples in groups:
            scores = [r for _, _, r in samples]
            mean = sum(scores) / len(scores)
            rewards.extend(scores)
            # One datum per distinct answer, its advantages summed: the same loss
            # as one datum per sample (the label policy draws the same answer often).
            merged = {}
            for tokens, logprobs, r in samples:
                key = tuple(tokens)
                if key in merged:
                    merged[key][2] += r - mean
                else:
                    merged[key] = [tokens, logprobs, r - mean]
            for tokens, logprobs, advantage in merged.values():
                if advantage == 0:
                    continue  # a group that all agrees carries no signal
                seq = prompt + tokens
                n_prompt = len(prompt) - 1
                data.append(types.Datum(
                    model_input=types.ModelInput.from_ints(seq[:-1]),
                    loss_fn_inputs={"target_tokens": seq[1:],
                                    "logprobs": [0.0] * n_prompt + list(logprobs),
                                    "advantages": [0.0] * n_prompt + [advantage] * len(tokens)}))
        if data:
            fb = tc.forward_backward(data, args.loss)
            lr = args.lr * (1 - (step - 1) / args.steps) if args.schedule == "linear" else args.lr
            op = tc.optim_step(types.AdamParams(learning_rate=lr))  # pipelined behind forward_backward
            fb.result(), op.result()
        t3 = time.monotonic()
        recent.append(sum(rewards) / len(rewards))
        line = f"step {step:>3}  reward {recent[-1]:.3f} (last 20: {sum(recent[-20:]) / len(recent[-20:]):.3f})"
        if policy_reward is not None:
            line += f"  policy reward {policy_reward:.3f}"
        if step % args.eval_every == 0 or step == args.steps:
            line += f"  held-out label acc {task.label_accuracy(tc, held_out):.4f}"
        t4 = time.monotonic()
        print(f"{line}  ({len(data)} datums, {t3 - t0:.1f} s: sample {t2 - t0:.1f}, train {t3 - t2:.1f}"
              + (f"; held-out {t4 - t3:.1f} s)" if t4 - t3 > 0.05 else ")"), flush=True)
    b = loop.training_run(tc.model_id).get("burst", {})
    print(f"run {tc.model_id}: {b.get('requests')} requests, {b.get('tokens')} tokens, cost ${b.get('cost', 0):.6f}")
    loop.close()


if __name__ == "__main__":
    main()
