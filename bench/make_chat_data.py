#!/usr/bin/python3
"""A chat training set with a wide length spread, for bench/train_real.sh.

Conversations built from the support-ticket demo (examples/support/train.jsonl):
one system prompt, then 1 to --max-turns user/assistant turns, each user turn
a ticket and each assistant turn its label and a reply of 0-3 sentences. The
turn count is drawn so that most conversations are short and a few long (as
in real chat logs): with the shipped tokenizer from ~40 to ~1,000 tokens.
Deterministic for a given --seed.

Usage: /usr/bin/python3 bench/make_chat_data.py --out FILE [--n 600] [--max-turns 12] [--seed 0]
"""

import argparse
import json
import os
import random

REPLIES = [
    "Thanks for reaching out.",
    "I have forwarded this to the right team.",
    "You will hear back from us within one business day.",
    "Please keep your ticket number for reference.",
    "Let me know if anything else comes up.",
    "Sorry for the trouble this has caused.",
]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--n", type=int, default=600)
    ap.add_argument("--max-turns", type=int, default=12)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    tickets = [json.loads(line)["messages"] for line in open(os.path.join(root, "examples/support/train.jsonl"))]
    system = tickets[0][0]
    rng = random.Random(a.seed)
    with open(a.out, "w") as f:
        for _ in range(a.n):
            # P(turns = k) ~ 0.72^k: half the conversations one or two turns
            turns = 1
            while turns < a.max_turns and rng.random() < 0.72:
                turns += 1
            msgs = [system]
            for _ in range(turns):
                t = rng.choice(tickets)
                reply = " ".join(rng.sample(REPLIES, rng.randint(0, 3)))
                msgs.append(t[1])
                msgs.append({"role": "assistant", "content": (t[2]["content"] + ". " + reply).strip()})
            f.write(json.dumps({"messages": msgs}) + "\n")


if __name__ == "__main__":
    main()
