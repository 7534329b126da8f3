"""Shared by the example loops: the support-ticket task as token-level data,
and held-out label accuracy (the label the model finds likeliest among the
six, as `burst eval` measures it). The loops use the tinker SDK itself,
pointed at Burst; the chat template is rendered by Burst's tokenizer
(clients/python: burst.Tokenizer), as the model's files are on the server."""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "clients", "python"))

import burst  # noqa: E402  (the server's tokenizer)
import tinker  # noqa: E402
from tinker import types  # noqa: E402

LABELS = ["billing", "technical", "account", "shipping", "refund", "feedback"]


def tickets(split, n=None):
    with open(os.path.join(ROOT, "examples", "support", f"{split}.jsonl")) as f:
        rows = [json.loads(line) for line in f]
    return rows[:n] if n else rows


class Task:
    """Prompts (chat up to the assistant's turn) and label completions, in tokens."""

    def __init__(self, tokenizer):
        self.tok = tokenizer
        probe = tokenizer.render_chat([{"role": "user", "content": "x"}], add_generation_prompt=True)
        self.end_of_turn = probe["end_of_turn"]
        self.label_tokens = {}
        for label in LABELS:
            # A label's tokens as the chat template renders an answer: content + end of turn.
            full = tokenizer.render_chat([{"role": "user", "content": "x"}, {"role": "assistant", "content": label}])
            self.label_tokens[label] = full["tokens"][full["prompt_tokens"]:]

    def prompt(self, ticket):
        msgs = [m for m in ticket["messages"] if m["role"] != "assistant"]
        return self.tok.render_chat(msgs, add_generation_prompt=True)["tokens"]

    @staticmethod
    def label(ticket):
        return [m["content"] for m in ticket["messages"] if m["role"] == "assistant"][-1]

    def sft_datum(self, ticket):
        p, c = self.prompt(ticket), self.label_tokens[self.label(ticket)]
        seq = p + c
        weights = [0.0] * (len(p) - 1) + [1.0] * len(c)
        return types.Datum(model_input=types.ModelInput.from_ints(seq[:-1]),
                           loss_fn_inputs={"target_tokens": seq[1:], "weights": weights})

    def label_accuracy(self, training_client, rows):
        """Held-out accuracy: for each ticket, the likeliest of the six labels (one forward request)."""
        data, index = [], []
        for i, t in enumerate(rows):
            p = self.prompt(t)
            for label in LABELS:
                seq = p + self.label_tokens[label]
                data.append(types.Datum(model_input=types.ModelInput.from_ints(seq[:-1]),
                                        loss_fn_inputs={"target_tokens": seq[1:]}))
                index.append((i, label, len(p) - 1))
        out = training_client.forward(data, "cross_entropy").result().loss_fn_outputs
        best = {}
        for (i, label, start), o in zip(index, out):
            score = sum(o["logprobs"].tolist()[start:])
            if i not in best or score > best[i][0]:
                best[i] = (score, label)
        return sum(best[i][1] == self.label(t) for i, t in enumerate(rows)) / len(rows)


class Loop:
    """The tinker SDK's ServiceClient on Burst (BURST_URL, BURST_API_KEY), and
    the server's tokenizer of a model."""

    def __init__(self):
        self.url = os.environ.get("BURST_URL", "http://127.0.0.1:8000")
        self.key = os.environ.get("BURST_API_KEY")
        if not self.key:
            sys.exit("set BURST_API_KEY (a Burst API key) and BURST_URL (burst serve's address)")
        # The SDK takes keys that start "tml-": Burst reads its own key after that prefix.
        self.service = tinker.ServiceClient(base_url=self.url, api_key="tml-" + self.key)
        self.burst = burst.BurstClient(base_url=self.url, api_key=self.key)

    def tokenizer(self, model):
        return self.burst.tokenizer(model)

    def training_run(self, model_id):
        """The run as Burst reports it (its `burst` object: requests, tokens, cost)."""
        return self.burst.get(f"{self.url}/api/v1/training_runs/{model_id}", cast_to=object)

    def close(self):
        self.service.close("success").result()
        self.burst.close()
