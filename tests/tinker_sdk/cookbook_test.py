"""The Tinker cookbook (tinker-cookbook, from PyPI) against `burst serve`:
its own supervised and RL training loops, as examples/cookbook/recipes.py
runs them (set up only through chz's command line), on a Qwen 3 model that
Burst serves from a local folder, with the cookbook's Qwen 3 renderer and
the tokenizer from that folder. Also a run's scope asked for in its
user_metadata: serverless where the catalog allows it, refused (never
dedicated instead) where it does not.

    BURST_BINARY=build/src/burst .venv/bin/python tests/tinker_sdk/cookbook_test.py
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.path.insert(0, os.path.join(ROOT, "examples", "cookbook"))

import tinker  # noqa: E402

import recipes  # noqa: E402  (examples/cookbook/recipes.py)
from burst_api import Api, Server, wait_for  # noqa: E402


def rows(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


class CookbookTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="burst-cookbook-")
        cls.models = os.path.join(cls.tmp.name, "models")
        recipes.make_model(cls.models)
        cls.server = Server(os.environ.get("BURST_BINARY", os.path.join(ROOT, "build", "src", "burst")),
                            os.path.join(cls.tmp.name, "data"), window=60, slots=2, threads_per_slot=1,
                            extra=["--model-root", cls.models])
        cls.env = dict(os.environ, TINKER_BASE_URL=cls.server.url, TINKER_API_KEY="tml-" + cls.server.key)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        cls.tmp.cleanup()

    def service(self):
        return tinker.ServiceClient(base_url=self.server.url, api_key="tml-" + self.server.key)

    def command(self, loop, out, *settings):
        return [sys.executable, os.path.join(ROOT, "examples", "cookbook", "recipes.py"), loop, "--models",
                self.models, "--out", out, *settings]

    def recipe(self, loop, out, *settings):
        """Runs the cookbook's loop to the end; its log folder's metrics rows."""
        p = subprocess.run(self.command(loop, out, *settings), env=self.env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=900)
        if p.returncode != 0:
            self.fail(f"{loop} exited {p.returncode}:\n{p.stdout[-6000:]}\nserve:\n" +
                      "\n".join(self.server.lines[-30:]))
        return p.stdout, rows(os.path.join(out, "metrics.jsonl"))

    def checkpoints(self, out):
        path = os.path.join(out, "checkpoints.jsonl")
        return rows(path) if os.path.exists(path) else []

    def listed(self, out):
        """Every checkpoint the cookbook recorded is one Burst lists for its run."""
        rest = tinker.RestClient(base_url=self.server.url, api_key="tml-" + self.server.key)
        paths = [c[k] for c in self.checkpoints(out) for k in ("state_path", "sampler_path") if k in c]
        self.assertTrue(paths)
        for path in paths:
            run = path.split("/")[2]  # tinker://RUN/...
            self.assertIn(path, [x.tinker_path for x in rest.list_checkpoints(run).result().checkpoints])

    def test_the_supervised_loop_learns_and_resumes_after_it_is_killed(self):
        out = os.path.join(self.tmp.name, "sl")
        settings = ("max_steps=8", "save_every=2")
        # Killed (SIGKILL) once its first periodic checkpoint is recorded.
        p = subprocess.Popen(self.command("sl", out, *settings), env=self.env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        try:
            wait_for("the loop's first checkpoint", lambda: self.checkpoints(out) or p.poll() is not None, 600, 0.05)
        finally:
            p.kill()
            p.wait()
        saved = self.checkpoints(out)
        self.assertTrue(saved, "killed before its first checkpoint")
        before = len(rows(os.path.join(out, "metrics.jsonl")))
        # The same command again: the cookbook resumes from its last state
        # (create_training_client_from_state_with_optimizer) and goes on
        # from the batch that state was saved before.
        log, got = self.recipe("sl", out, *settings)
        self.assertIn(f"Resumed training from {saved[-1]['state_path']}", log)
        trained = [r for r in got if "train_mean_nll" in r]
        self.assertEqual(len(trained), before + 8 - saved[-1]["batch"], "the steps after the restore point, once")
        self.assertEqual(trained[-1]["progress"], 1.0)
        nll = [r["train_mean_nll"] for r in trained]
        self.assertLess(nll[-1], nll[0] - 0.05, f"the loss falls: {nll}")
        self.assertTrue(any("test/nll" in r for r in got), "the held-out NLL evaluation ran")
        self.listed(out)

    def test_the_rl_loop_samples_grades_and_trains(self):
        out = os.path.join(self.tmp.name, "rl")
        _, got = self.recipe("rl", out, "dataset_builder.n_batches=3")
        steps = [r for r in got if "env/all/reward/total" in r]
        self.assertEqual(len(steps), 3)
        for r in steps:
            self.assertGreater(r["env/all/ac_tokens_per_turn"], 0, "it sampled")
        final = [c for c in self.checkpoints(out) if c["name"] == "final"]
        self.assertEqual(len(final), 1)
        self.assertGreater(final[0]["cumulative_tokens"]["sampled"], 0)
        self.assertGreater(final[0]["cumulative_tokens"]["trained"], 0)
        self.listed(out)

    def test_serverless_scope_is_refused_not_fallen_back(self):
        sc = self.service()
        tc = sc.create_lora_training_client(base_model=recipes.MODEL, rank=8, user_metadata={"scope": "serverless"})
        tc = tc.result() if hasattr(tc, "result") else tc
        code, run = Api(self.server.url, self.server.key).call("GET", f"/api/v1/training_runs/{tc.model_id}")
        self.assertEqual((code, run["burst"]["scope"]), (200, "serverless"), run)
        with self.assertRaises(tinker.BadRequestError) as refused:  # over the catalog's serverless rank
            made = sc.create_lora_training_client(base_model=recipes.MODEL, rank=16,
                                                  user_metadata={"scope": "serverless"})
            made.result() if hasattr(made, "result") else made
        self.assertIn("user_metadata.scope", str(refused.exception))
        self.assertIn("serverless limit", str(refused.exception))


if __name__ == "__main__":
    import tinker_cookbook
    print(f"tinker SDK {tinker.__version__}, tinker-cookbook {tinker_cookbook.__version__}", flush=True)
    unittest.main(verbosity=2)
