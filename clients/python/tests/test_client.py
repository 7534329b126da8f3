"""The Python client against a real `burst serve` (and its real workers),
started here: files, a job and its model, completions, usage, and the
server's tokenizer. (Training loops use the tinker SDK: tests/tinker_sdk.)

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

import burst  # noqa: E402


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


class Tokenizer(unittest.TestCase):
    def test_the_servers_tokenizer_and_chat_template(self):
        client = burst.BurstClient(base_url=SERVER.url, api_key=SERVER.key)
        tok = client.tokenizer("burst-small")
        self.assertEqual(tok.decode(tok.encode("refund please")), "refund please")
        messages = tickets(1)[0]["messages"]
        chat = tok.render_chat(messages)
        ids, w = chat["tokens"], chat["weights"]
        self.assertEqual(len(ids), len(w))
        prompt = tok.render_chat(messages[:-1], add_generation_prompt=True)
        self.assertEqual(ids[:len(prompt["tokens"])], prompt["tokens"], "the prompt is the chat's beginning")
        self.assertEqual(set(w[:len(prompt["tokens"])]), {0.0}, "no loss on the prompt")
        self.assertGreater(sum(w), 0, "loss on the answer")
        self.assertIn(messages[-1]["content"], tok.decode(ids[len(prompt["tokens"]):]))
        with self.assertRaises(burst.APIError) as e:
            client.tokenizer("no-such-model").encode("x")
        self.assertEqual(e.exception.status, 404)
        client.close()


class Platform(unittest.TestCase):
    def test_files_a_job_and_its_model(self):
        client = burst.BurstClient(base_url=SERVER.url, api_key=SERVER.key)
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
        with self.assertRaises(burst.APIError) as e:
            client.fine_tuning.jobs.pause(job["id"])
        self.assertEqual(e.exception.status, 409)  # it has ended
        self.assertEqual(client.model(job["fine_tuned_model"])["id"], job["fine_tuned_model"])
        self.assertTrue(client.delete_model(job["fine_tuned_model"])["deleted"])
        with self.assertRaises(burst.APIError) as e:
            client.chat.completions.create(model=job["fine_tuned_model"], max_tokens=3,
                                           messages=tickets(1)[0]["messages"][:2])
        self.assertEqual(e.exception.status, 404)
        with self.assertRaises(burst.APIError) as e:
            client.fine_tuning.jobs.create(model="no-such-model", training_file=f["id"])
        self.assertEqual(e.exception.param, "model")
        client.close()


if __name__ == "__main__":
    unittest.main()
