"""The Python client against a real `burst serve` (and its real workers),
started here: files, a job and its model, completions, usage, and the
server's tokenizer. (Training loops use the tinker SDK: tests/tinker_sdk.)

Run with the project's venv (CTest: python_client_test), which has the
openai SDK the client builds on; BURST_BINARY names the `burst` binary
(default: build/src/burst).
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

import openai  # noqa: E402
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
        with burst.BurstClient(base_url=SERVER.url, api_key=SERVER.key) as client:
            tok = client.tokenizer("burst-small")
            self.assertEqual(tok.decode(tok.encode("refund please")), "refund please")
            messages = tickets(1)[0]["messages"]
            chat = tok.render_chat(messages)
            ids, w = chat["tokens"], chat["weights"]
            self.assertEqual(len(ids), len(w))
            prompt = tok.render_chat(messages[:-1], add_generation_prompt=True)["tokens"]
            self.assertEqual(ids[:len(prompt)], prompt, "the prompt is the chat's beginning")
            self.assertEqual(set(w[:len(prompt)]), {0.0}, "no loss on the prompt")
            self.assertGreater(sum(w), 0, "loss on the answer")
            self.assertIn(messages[-1]["content"], tok.decode(ids[len(prompt):]))
            with self.assertRaises(burst.APIError) as e:
                client.tokenizer("no-such-model").encode("x")
            self.assertEqual(e.exception.status_code, 404)


class Platform(unittest.TestCase):
    def test_files_a_job_and_its_model(self):
        client = burst.BurstClient(base_url=SERVER.url, api_key=SERVER.key)
        self.assertIsInstance(client, openai.OpenAI)
        lines = "".join(json.dumps(t) + "\n" for t in tickets(16)).encode()
        f = client.files.create(file=("train.jsonl", lines), purpose="fine-tune")  # the openai SDK's own
        self.assertTrue(f.id.startswith("file-"))
        recipe = {"max_steps": 2, "batch_size": 4, "max_seq_len": 128}
        self.assertIn("cost", json.dumps(client.estimate_job(model="burst-small", training_file=f.id,
                                                              recipe=recipe)))
        job = client.fine_tuning.jobs.create(model="burst-small", training_file=f.id, extra_body={"recipe": recipe})
        job = client.wait_job(job.id, timeout=300)
        self.assertEqual(job["status"], "succeeded", job)
        out = client.chat.completions.create(model=job["fine_tuned_model"], max_tokens=3,
                                             messages=tickets(1)[0]["messages"][:2])
        self.assertEqual(out.object, "chat.completion")
        self.assertIn("data", client.usage())
        # The checkpoint as a tar: weights, an adapter naming its base model, a model card.
        tar = tarfile.open(fileobj=io.BytesIO(client.download_checkpoint(job["id"], 2)))
        top = job["id"] + "-step-2/"
        names = tar.getnames()
        for name in ("adapter_config.json", "adapter_model.safetensors", "README.md", "manifest.json"):
            self.assertIn(top + name, names)
        adapter = json.load(tar.extractfile(top + "adapter_config.json"))
        tar.close()
        self.assertEqual(adapter["base_model_name_or_path"], "burst-small")
        with self.assertRaises(openai.ConflictError):  # it has ended
            client.fine_tuning.jobs.pause(job["id"])
        self.assertEqual(client.models.retrieve(job["fine_tuned_model"]).id, job["fine_tuned_model"])
        self.assertTrue(client.models.delete(job["fine_tuned_model"]).deleted)
        with self.assertRaises(openai.NotFoundError):
            client.chat.completions.create(model=job["fine_tuned_model"], max_tokens=3,
                                           messages=tickets(1)[0]["messages"][:2])
        with self.assertRaises(burst.APIError) as e:
            client.fine_tuning.jobs.create(model="no-such-model", training_file=f.id)
        self.assertEqual(e.exception.param, "model")
        client.close()

    def test_what_the_openai_sdk_has_no_resource_for(self):
        with burst.BurstClient(base_url=SERVER.url, api_key=SERVER.key) as client:
            for listing in (client.sweeps.list(), client.evals.list(), client.deployments.list(),
                            client.workers()):
                self.assertIsInstance(listing["data"], list)
            self.assertIn("burst-small", json.dumps(client.prices()))
            with self.assertRaises(burst.APIError) as e:
                client.sweeps.retrieve("sweep-nosuch")
            self.assertEqual(e.exception.status_code, 404)
            with self.assertRaises(burst.APIError) as e:
                client.deployments.create(name="d", model="no-such-model")
            self.assertEqual(e.exception.status_code // 100, 4)


class Package(unittest.TestCase):
    def test_it_installs_with_pip_and_builds_on_the_openai_client(self):
        with tempfile.TemporaryDirectory(prefix="burst-pyclient-pip-") as target:
            subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps",
                            "--no-build-isolation", "--no-index", "--target", target, os.path.dirname(HERE)],
                           check=True, capture_output=True, text=True)
            check = ("import burst, openai; assert burst.__file__.startswith(%r), burst.__file__; "
                     "assert issubclass(burst.BurstClient, openai.OpenAI)" % target)
            subprocess.run([sys.executable, "-c", check], check=True, cwd=target,
                           env=dict(os.environ, PYTHONPATH=target))


if __name__ == "__main__":
    unittest.main()
