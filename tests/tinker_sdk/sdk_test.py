"""The real tinker SDK against `burst serve`: the release first on the path
(the lock's newest, or 0.25.0 when PYTHONPATH puts .venv/tinker-0.25.0
first) drives a supervised loop, the RL losses, checkpoints and sampling on
a real control plane with real workers, over the protocol as the SDK speaks
it.

    BURST_BINARY=build/src/burst .venv/bin/python tests/tinker_sdk/sdk_test.py
"""
import glob
import inspect
import json
import os
import subprocess
import sys
import tempfile
import unittest
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "bench"))

import tinker  # noqa: E402
from tinker import types  # noqa: E402

from burst_api import Api, Server, wait_for  # noqa: E402  (bench/burst_api.py: starts `burst serve`)
from sdk_util import client, sampler_adapter  # noqa: E402

MODEL = "burst-small"
# From 0.26 ServiceClient.close(status) finishes the session; 0.25.0 has no close.
NEW_CLOSE = hasattr(tinker.ServiceClient, "close") and "status" in inspect.signature(tinker.ServiceClient.close).parameters
# A ticket-like sequence of token ids (burst-small's vocabulary has 4096).
SEQ = [1, 17, 300, 45, 812, 9, 77, 1024, 5, 260, 41, 99, 3000, 12, 8, 2]




def datum(seq=SEQ):
    return types.Datum(model_input=types.ModelInput.from_ints(seq[:-1]),
                       loss_fn_inputs={"target_tokens": seq[1:], "weights": [1.0] * (len(seq) - 1)})


def rl_datum(loss, seq=SEQ):
    n = len(seq) - 1
    inputs = {"target_tokens": seq[1:], "logprobs": [-2.0] * n, "advantages": [0.5] * n}
    return types.Datum(model_input=types.ModelInput.from_ints(seq[:-1]), loss_fn_inputs=inputs)


class SdkTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="burst-tinker-sdk-")
        cls.server = Server(os.environ.get("BURST_BINARY", os.path.join(ROOT, "build", "src", "burst")),
                            os.path.join(cls.tmp.name, "data"), window=60, slots=2, threads_per_slot=1)
        # The SDK takes only keys that start "tml-": Burst reads its own key after that prefix.
        cls.sc = tinker.ServiceClient(base_url=cls.server.url, api_key="tml-" + cls.server.key)

    @classmethod
    def tearDownClass(cls):
        try:
            if NEW_CLOSE:
                cls.sc.close("success").result()  # POST /api/v1/sessions/{id}/finish
        finally:
            cls.server.stop()
            cls.tmp.cleanup()

    def test_the_release_asked_for_is_the_one_tested(self):
        expected = os.environ.get("BURST_EXPECT_TINKER")
        if expected:
            self.assertEqual(tinker.__version__, expected)

    def test_capabilities_list_the_model(self):
        caps = self.sc.get_server_capabilities()
        self.assertIn(MODEL, [m.model_name for m in caps.supported_models])

    def test_a_supervised_loop_learns_and_its_checkpoints_sample_and_resume(self):
        tc = client(self.sc.create_lora_training_client(base_model=MODEL, rank=4, seed=0))
        losses = []
        for _ in range(6):
            fb = tc.forward_backward([datum()], "cross_entropy")
            tc.optim_step(types.AdamParams(learning_rate=5e-3)).result()
            losses.append(fb.result().metrics["loss:sum"])
        self.assertLess(losses[-1], losses[0] * 0.9, losses)
        # forward: the same loss as the next forward_backward would compute, nothing applied.
        fwd = tc.forward([datum()], "cross_entropy").result()
        self.assertEqual(len(fwd.loss_fn_outputs), 1)
        self.assertEqual(len(fwd.loss_fn_outputs[0]["logprobs"].tolist()), len(SEQ) - 1)
        # A state checkpoint, loaded by a new client, computes the same.
        state = tc.save_state("sft-6").result().path
        self.assertTrue(state.startswith("tinker://"), state)
        again = client(self.sc.create_training_client_from_state(state))
        fwd2 = again.forward([datum()], "cross_entropy").result()
        self.assertEqual(fwd.loss_fn_outputs[0]["logprobs"].tolist(), fwd2.loss_fn_outputs[0]["logprobs"].tolist())
        # Sampler weights: a sampling client pinned to them samples and scores.
        path = tc.save_weights_for_sampler("sft-6").result().path
        sampler = client(self.sc.create_sampling_client(model_path=path))
        out = sampler.sample(prompt=types.ModelInput.from_ints(SEQ[:6]), num_samples=2,
                             sampling_params=types.SamplingParams(max_tokens=4, temperature=1.0, seed=3)).result()
        self.assertEqual(len(out.sequences), 2)
        for s in out.sequences:
            self.assertTrue(1 <= len(s.tokens) <= 4, s.tokens)
            self.assertEqual(len(s.logprobs), len(s.tokens))
        lps = sampler.compute_logprobs(types.ModelInput.from_ints(SEQ)).result()
        self.assertEqual(len(lps), len(SEQ))
        self.assertIsNone(lps[0])
        # The REST client lists the run and its checkpoints.
        rest = self.sc.create_rest_client()
        run_ids = [r.training_run_id for r in rest.list_training_runs().result().training_runs]
        self.assertIn(tc.model_id, run_ids)
        names = [c.checkpoint_id for c in rest.list_checkpoints(tc.model_id).result().checkpoints]
        self.assertIn("weights/sft-6", names)
        self.assertIn("sampler_weights/sft-6", names)
        if hasattr(tc, "save_weights_external"):
            self.check_downloads(tc, state, rest)

    def check_downloads(self, tc, state, rest):
        """0.37 and later: save_weights_external and its per-file links, and the SDK's own
        `tinker checkpoint download`, which exports a state checkpoint through them."""
        want = sampler_adapter(self.server, tc.model_id, "sft-6")
        path = tc.save_weights_external("export-6").result().path
        self.assertEqual(path, f"tinker://{tc.model_id}/external_weights/export-6")
        urls = rest.get_external_weights_urls(path).result().urls
        self.assertEqual(sorted(urls), ["adapter_config.json", "adapter_model.safetensors"])
        with urllib.request.urlopen(urls["adapter_model.safetensors"]) as r:
            self.assertEqual(r.read(), want)
        with urllib.request.urlopen(urls["adapter_config.json"]) as r:
            self.assertEqual(json.loads(r.read())["r"], 4)
        kinds = {c.checkpoint_id: c.checkpoint_type for c in rest.list_checkpoints(tc.model_id).result().checkpoints}
        self.assertEqual(kinds["external_weights/export-6"], "external")
        admin = tinker.AdminClient(base_url=self.server.url, api_key="tml-" + self.server.key)
        usage = admin.get_current_checkpoint_storage_usage().result().data
        self.assertEqual(len(usage), 1)
        self.assertGreaterEqual(usage[0].checkpoint_count, 3)
        self.assertGreater(usage[0].size_bytes, len(want))
        # The CLI: a run made from the state, exported, downloaded, the export deleted.
        out = os.path.join(self.tmp.name, "download")
        env = dict(os.environ, TINKER_BASE_URL=self.server.url, TINKER_API_KEY="tml-" + self.server.key,
                   TINKER_TELEMETRY="0")
        tinker_cli = os.path.join(os.path.dirname(sys.executable), "tinker")
        done = subprocess.run([tinker_cli, "checkpoint", "download", state, "--output", out], env=env,
                              capture_output=True, text=True, timeout=300)
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        found = [os.path.join(d, f) for d, _, fs in os.walk(out) for f in fs]
        self.assertEqual(sorted(os.path.basename(f) for f in found),
                         ["adapter_config.json", "adapter_model.safetensors"], found)
        with open(next(f for f in found if f.endswith(".safetensors")), "rb") as f:
            self.assertEqual(f.read(), want, "the state's adapter, as its sampler weights hold it")
        # A route Burst does not serve says so by name (400: the SDK does not retry it).
        with self.assertRaises(tinker.BadRequestError) as refused:
            rest.copy_weights(path, "proj-1").result()
        self.assertIn("copy_weights is not available in Burst", str(refused.exception))

    @unittest.skipUnless(NEW_CLOSE, "ServiceClient.close(status) came with SDK 0.26")
    def test_a_closed_session_takes_no_more_work(self):
        sc = tinker.ServiceClient(base_url=self.server.url, api_key="tml-" + self.server.key)
        client(sc.create_lora_training_client(base_model=MODEL, rank=4, seed=2))
        session = sc.holder.get_session_id()
        sc.close("success", detail="done").result()  # POST /api/v1/sessions/{id}/finish
        api = Api(self.server.url, self.server.key)
        code, body = api.call("POST", "/api/v1/session_heartbeat",
                              {"session_id": session, "type": "session_heartbeat"})
        self.assertEqual(code, 409, body)
        self.assertIn("was finished (success)", json.dumps(body))
        # First reason wins; a bad reason is refused by name.
        self.assertEqual(api.call("POST", f"/api/v1/sessions/{session}/finish",
                                  {"reason": {"type": "errored"}, "detail": None})[0], 200)
        code, body = api.call("POST", f"/api/v1/sessions/{session}/finish", {"reason": {"type": "late"}})
        self.assertEqual((code, body["error"]["param"]), (400, "reason.type"), body)

    def test_a_deactivated_run_takes_no_more_requests(self):
        tc = client(self.sc.create_lora_training_client(base_model=MODEL, rank=4, seed=3))
        tc.forward_backward([datum()], "cross_entropy").result()
        api = Api(self.server.url, self.server.key)
        code, body = api.call("POST", f"/api/v1/training_runs/{tc.model_id}/deactivate", {})
        self.assertEqual((code, body.get("status")), (200, "inactive"), body)
        with self.assertRaises(tinker.BadRequestError) as refused:  # 400: the SDK does not retry it
            tc.optim_step(types.AdamParams(learning_rate=1e-4)).result()
        self.assertIn("was deactivated", str(refused.exception))

        def let_go():  # the worker that held it, told at its next lease (its log)
            for path in glob.glob(os.path.join(self.server.data, "**", "*.log"), recursive=True):
                with open(path, errors="replace") as f:
                    if f"training run {tc.model_id} let go" in f.read():
                        return True
            return False
        wait_for("the worker to let the deactivated run go", let_go, 30, 0.2)

    def test_the_rl_losses_train(self):
        tc = client(self.sc.create_lora_training_client(base_model=MODEL, rank=4, seed=1))
        for loss in ("importance_sampling", "ppo", "cispo", "dro"):
            with self.subTest(loss=loss):
                out = tc.forward_backward([rl_datum(loss)], loss).result()
                self.assertIn("loss:sum", out.metrics)
                tc.optim_step(types.AdamParams(learning_rate=1e-4)).result()


if __name__ == "__main__":
    print(f"tinker SDK {tinker.__version__} from {os.path.dirname(tinker.__file__)}", flush=True)
    unittest.main(verbosity=2)
