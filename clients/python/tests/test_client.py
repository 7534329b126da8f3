"""The Python client against a real `burst serve` (and its real workers),
started here: a training loop with the tinker SDK's names, the REST calls
on runs and checkpoints, and the rest of Burst's API.

Run with Debian's /usr/bin/python3 (CTest: python_client_test); BURST_BINARY
names the `burst` binary (default: build/src/burst).
"""
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))

import burst as tinker  # noqa: E402  (the one line a tinker loop changes)
from burst import types  # noqa: E402


class Server:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="burst-pyclient-")
        binary = os.environ.get("BURST_BINARY", os.path.join(ROOT, "build", "src", "burst"))
        self.log = open(os.path.join(self.dir, "serve.log"), "wb")
        self.proc = subprocess.Popen([binary, "serve", "--data", os.path.join(self.dir, "data"), "--listen",
                                      "127.0.0.1:0", "--slots", "1", "--threads-per-slot", "1",
                                      "--scaledown-window", "30"],
                                     stdout=subprocess.PIPE, stderr=self.log)
        deadline = time.monotonic() + 60
        line = b""
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            m = re.search(rb"listening on (http://127\.0\.0\.1:[0-9]+)", line)
            if m:
                self.url = m.group(1).decode()
                break
            if self.proc.poll() is not None:
                raise RuntimeError("burst serve exited: " + open(os.path.join(self.dir, "serve.log")).read())
        else:
            raise RuntimeError("burst serve did not start")
        with open(os.path.join(self.dir, "data", "admin.key")) as f:
            self.key = f.read().strip()

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.proc.stdout.close()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


SERVER = None


def setUpModule():
    global SERVER
    SERVER = Server()


def tearDownModule():
    SERVER.stop()


def tickets(n):
    with open(os.path.join(ROOT, "examples", "support", "train.jsonl")) as f:
        return [json.loads(line) for line in f][:n]


class TrainingLoop(unittest.TestCase):
    def setUp(self):
        self.sc = tinker.ServiceClient(base_url=SERVER.url, api_key="tml-" + SERVER.key)

    def tearDown(self):
        self.sc.close()

    def test_supervised_steps_lower_the_loss_and_the_sampler_serves_the_weights(self):
        tc = self.sc.create_lora_training_client(base_model="burst-small", rank=8, seed=3)
        tok = tc.get_tokenizer()
        self.assertEqual(tok.decode(tok.encode("refund please")), "refund please")
        data = []
        for t in tickets(4):
            chat = tok.render_chat(t["messages"])
            ids, w = chat["tokens"], chat["weights"]
            data.append(types.Datum(model_input=types.ModelInput.from_ints(ids[:-1]),
                                    loss_fn_inputs={"target_tokens": ids[1:], "weights": w[1:]}))
        losses = []
        for _ in range(4):
            fb = tc.forward_backward(data, "cross_entropy")          # pipelined: both sent before either result
            op = tc.optim_step(types.AdamParams(learning_rate=2e-3))
            losses.append(fb.result().metrics["loss:sum"])
            self.assertIn("grad_norm", op.result().metrics)
        self.assertLess(losses[-1], losses[0], losses)
        out = fb.result().loss_fn_outputs[0]
        self.assertEqual(len(out["logprobs"].tolist()), len(data[0].model_input.to_ints()))

        sampler = tc.save_weights_and_get_sampling_client("step-4")
        prompt = types.ModelInput.from_ints(tok.render_chat(tickets(1)[0]["messages"][:2],
                                                            add_generation_prompt=True)["tokens"])
        res = sampler.sample(prompt, num_samples=3, sampling_params=types.SamplingParams(max_tokens=5, seed=1)).result()
        self.assertEqual(len(res.sequences), 3)
        for s in res.sequences:
            self.assertIn(s.stop_reason, ("stop", "length"))
            self.assertLessEqual(len(s.tokens), 5)
            self.assertEqual(len(s.logprobs), len(s.tokens))
        lp = sampler.compute_logprobs(prompt).result()
        self.assertIsNone(lp[0])
        self.assertEqual(len(lp), prompt.length)

        # An unnamed sampler (save_weights_and_get_sampling_client()) works the same.
        quick = tc.save_weights_and_get_sampling_client()
        self.assertTrue(quick.sample(prompt, 1, types.SamplingParams(max_tokens=2)).result().sequences)

        # save_state / load_state_with_optimizer into a second run continues identically.
        path = tc.save_state("state-4").result().path
        self.assertEqual(path, f"tinker://{tc.model_id}/weights/state-4")
        twin = self.sc.create_lora_training_client(base_model="burst-small", rank=8, seed=77)
        twin.load_state_with_optimizer(path).result()
        a = tc.forward_backward(data[:1], "cross_entropy").result()
        b = twin.forward_backward(data[:1], "cross_entropy").result()
        self.assertEqual(a.loss_fn_outputs[0]["logprobs"].tolist(), b.loss_fn_outputs[0]["logprobs"].tolist())

        rest = self.sc.create_rest_client()
        runs = rest.list_training_runs()
        self.assertIn(tc.model_id, [r["training_run_id"] for r in runs["training_runs"]])
        ids = [c["checkpoint_id"] for c in rest.list_checkpoints(tc.model_id)]
        self.assertIn("sampler_weights/step-4", ids)
        self.assertIn("weights/state-4", ids)
        tar = tarfile.open(fileobj=io.BytesIO(rest.download_checkpoint_archive(tc.model_id, "sampler_weights/step-4")))
        self.assertIn("adapter_model.safetensors", tar.getnames())
        config = json.loads(tar.extractfile("adapter_config.json").read())
        self.assertIn("lm_head", config["target_modules"])

    def test_an_rl_loss_and_errors_that_name_the_field(self):
        tc = self.sc.create_lora_training_client(base_model="burst-small", rank=4, seed=5)
        ids = [5, 9, 13, 17, 21, 25]
        d = types.Datum(model_input=types.ModelInput.from_ints(ids[:-1]),
                        loss_fn_inputs={"target_tokens": ids[1:], "logprobs": [-3.0] * 5, "advantages": [0, 0, 1, 1, 1]})
        out = tc.forward_backward([d], "ppo", {"clip_low_threshold": 0.9, "clip_high_threshold": 1.1}).result()
        self.assertEqual(len(out.loss_fn_outputs[0]["elementwise_loss"].tolist()), 5)
        bad = types.Datum(model_input=types.ModelInput.from_ints([1, 2]),
                          loss_fn_inputs={"target_tokens": [2, 10 ** 7]})
        with self.assertRaises(tinker.APIError) as e:
            tc.forward_backward([bad], "cross_entropy")
        self.assertEqual(e.exception.status, 400)
        self.assertIn("target_tokens", e.exception.param)
        self.assertIn("vocabulary", e.exception.message)


class Platform(unittest.TestCase):
    def test_files_a_job_and_its_model(self):
        client = tinker.BurstClient(base_url=SERVER.url, api_key=SERVER.key)
        lines = "".join(json.dumps(t) + "\n" for t in tickets(16)).encode()
        f = client.files.create(io.BytesIO(lines), filename="train.jsonl")
        self.assertTrue(f["id"].startswith("file-"))
        job = client.fine_tuning.jobs.create(model="burst-small", training_file=f["id"],
                                             recipe={"max_steps": 2, "batch_size": 4, "max_seq_len": 128})
        job = client.fine_tuning.jobs.wait(job["id"], timeout=300)
        self.assertEqual(job["status"], "succeeded", job)
        out = client.chat.completions.create(model=job["fine_tuned_model"], max_tokens=3,
                                             messages=tickets(1)[0]["messages"][:2])
        self.assertEqual(out["object"], "chat.completion")
        self.assertIn("data", client.usage())
        # The checkpoint as a tar: weights, an adapter naming its base model, a model card.
        tar = tarfile.open(fileobj=io.BytesIO(client.fine_tuning.jobs.download_checkpoint(job["id"], 2)))
        top = job["id"] + "-step-2/"
        names = tar.getnames()
        for name in ("adapter_config.json", "adapter_model.safetensors", "README.md", "manifest.json"):
            self.assertIn(top + name, names)
        adapter = json.load(tar.extractfile(top + "adapter_config.json"))
        tar.close()
        self.assertEqual(adapter["base_model_name_or_path"], "burst-small")
        with self.assertRaises(tinker.APIError) as e:
            client.fine_tuning.jobs.pause(job["id"])
        self.assertEqual(e.exception.status, 409)  # it has ended
        self.assertEqual(client.model(job["fine_tuned_model"])["id"], job["fine_tuned_model"])
        self.assertTrue(client.delete_model(job["fine_tuned_model"])["deleted"])
        with self.assertRaises(tinker.APIError) as e:
            client.chat.completions.create(model=job["fine_tuned_model"], max_tokens=3,
                                           messages=tickets(1)[0]["messages"][:2])
        self.assertEqual(e.exception.status, 404)
        with self.assertRaises(tinker.APIError) as e:
            client.fine_tuning.jobs.create(model="no-such-model", training_file=f["id"])
        self.assertEqual(e.exception.param, "model")
        client.close()


if __name__ == "__main__":
    unittest.main()
