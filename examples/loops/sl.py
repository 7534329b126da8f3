"""A supervised loop on the support-ticket task: batches of tickets rendered
with the model's chat template (loss on the answer's tokens), forward_backward
and optim_step pipelined, held-out label accuracy every few steps, a sampler
checkpoint at the end.

    BURST_URL=... BURST_API_KEY=... .venv/bin/python examples/loops/sl.py [--steps 30]
"""
import argparse
import random
import time

from common import Loop, Task, tickets, types


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="burst-small")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--rank", type=int, default=8)
    ap.add_argument("--eval-every", type=int, default=10)
    ap.add_argument("--eval", type=int, default=48)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    loop = Loop()
    tc = loop.service.create_lora_training_client(base_model=args.model, rank=args.rank, seed=args.seed).result()
    task = Task(loop.tokenizer(args.model))
    train, held_out = tickets("train"), tickets("valid", args.eval)
    print(f"step {0:>3}  held-out label acc {task.label_accuracy(tc, held_out):.4f}  (the base model)")
    pending = None
    for step in range(1, args.steps + 1):
        t0 = time.monotonic()
        fb = tc.forward_backward([task.sft_datum(t) for t in rng.sample(train, args.batch)], "cross_entropy")
        op = tc.optim_step(types.AdamParams(learning_rate=args.lr))
        if pending:  # the previous step's results, read while this step runs
            loss = pending.result().metrics["loss:sum"]
        pending = fb
        op.result()
        if step % args.eval_every == 0 or step == args.steps:
            loss = fb.result().metrics["loss:sum"] / args.batch
            print(f"step {step:>3}  loss/ticket {loss:.4f}  held-out label acc "
                  f"{task.label_accuracy(tc, held_out):.4f}  ({time.monotonic() - t0:.1f} s)", flush=True)
    path = tc.save_weights_for_sampler(f"step-{args.steps}").result().path
    print(f"sampler weights: {path} (deployable: POST /v1/deployments with this checkpoint)")
    loop.close()


if __name__ == "__main__":
    main()
