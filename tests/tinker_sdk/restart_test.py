"""Training loops outlive their control plane: the real tinker SDK trains
through a `burst serve` killed with SIGKILL and started again on the same
data folder and port. The client keeps its objects (the SDK retries while
the server is down), no step is lost or applied twice, and the weights at
the end are byte for byte those of a run that was never interrupted.

    BURST_BINARY=build/src/burst .venv/bin/python tests/tinker_sdk/restart_test.py
"""
import os
import signal
import socket
import sys
import tempfile
import threading
import time
import unittest
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "bench"))

import tinker  # noqa: E402
from tinker import types  # noqa: E402

from burst_api import Server  # noqa: E402
from sdk_util import client, sampler_adapter  # noqa: E402

MODEL = "burst-small"
SEQS = [[1, 17, 300, 45, 812, 9, 77, 1024, 5, 260, 41, 99, 3000, 12, 8, 2],
        [4, 90, 7, 2048, 33, 61, 5, 400, 18, 2]]
STEPS = 6




def datum(seq):
    return types.Datum(model_input=types.ModelInput.from_ints(seq[:-1]),
                       loss_fn_inputs={"target_tokens": seq[1:], "weights": [1.0] * (len(seq) - 1)})


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def step(tc, i):
    fb = tc.forward_backward([datum(SEQS[i % 2])], "cross_entropy")
    tc.optim_step(types.AdamParams(learning_rate=5e-3)).result()
    return fb.result().metrics["loss:sum"]


class RestartTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="burst-loop-restart-")
        self.data = os.path.join(self.tmp.name, "data")
        self.listen = f"127.0.0.1:{free_port()}"
        self.server = self.start()

    def tearDown(self):
        self.server.stop()
        self.tmp.cleanup()

    def start(self):
        return Server(os.environ.get("BURST_BINARY", os.path.join(ROOT, "build", "src", "burst")), self.data,
                      window=60, slots=2, threads_per_slot=1, listen=self.listen)

    def adapter(self, path):
        run, _, name = path[len("tinker://"):].split("/")
        return sampler_adapter(self.server, run, name)

    def kill_and_restart(self, wait, everything=False):
        """SIGKILL `burst serve` (with its workers when `everything`), start it
        again 1 s later on the same folder and port, and return what `wait()`
        returns: the client's call across the restart (the SDK retries)."""
        killed = time.time()
        if everything:
            os.killpg(self.server.proc.pid, signal.SIGKILL)
        else:
            os.kill(self.server.proc.pid, signal.SIGKILL)
        self.server.proc.wait()
        self.server.proc.stdout.close()
        restarted = {}

        def restart():
            time.sleep(1)  # the client meets a dead port first
            t0 = time.time()
            restarted["server"] = self.start()
            restarted["seconds"] = time.time() - t0

        t = threading.Thread(target=restart)
        t.start()
        try:
            out = wait()
        finally:
            t.join()
        self.server = restarted["server"]
        self.assertTrue(any("took over" in line for line in self.server.lines), self.server.lines[-20:])
        print(f"went on {time.time() - killed:.1f} s after the kill (1 s down, serve up in "
              f"{restarted['seconds']:.1f} s)", flush=True)
        return out

    def test_a_loop_goes_on_through_a_killed_control_plane(self):
        sc = tinker.ServiceClient(base_url=self.server.url, api_key="tml-" + self.server.key)
        # The run that is never interrupted, then the one that is.
        calm = client(sc.create_lora_training_client(base_model=MODEL, rank=4, seed=7))
        calm_losses = [step(calm, i) for i in range(STEPS)]
        calm_state = calm.save_state("mid").result().path
        calm_losses.append(step(calm, STEPS))
        want = self.adapter(calm.save_weights_for_sampler("end").result().path)

        tc = client(sc.create_lora_training_client(base_model=MODEL, rank=4, seed=7))
        adam = types.AdamParams(learning_rate=5e-3)
        losses = [step(tc, 0)]
        # Between requests.
        losses.append(self.kill_and_restart(lambda: step(tc, 1)))
        # During forward_backward: sent, its result not yet read.
        fb = tc.forward_backward([datum(SEQS[0])], "cross_entropy")
        losses.append(self.kill_and_restart(lambda: fb.result().metrics["loss:sum"]))
        tc.optim_step(adam).result()
        # During optim_step, its workers killed too.
        fb = tc.forward_backward([datum(SEQS[1])], "cross_entropy")
        opt = tc.optim_step(adam)
        self.kill_and_restart(opt.result, everything=True)
        losses.append(fb.result().metrics["loss:sum"])
        losses += [step(tc, i) for i in range(4, STEPS)]
        # During save_state.
        save = tc.save_state("mid")
        state = self.kill_and_restart(lambda: save.result().path)
        self.assertEqual(state.split("/")[-2:], calm_state.split("/")[-2:])
        losses.append(step(tc, STEPS))
        self.assertEqual(losses, calm_losses, "the same steps, each applied once")
        got = self.adapter(tc.save_weights_for_sampler("end").result().path)
        self.assertEqual(got, want, "the final weights of the uninterrupted run, byte for byte")
        # The state saved across a restart loads into a run that computes as the calm one's.
        again = client(sc.create_training_client_from_state(state))
        calm_again = client(sc.create_training_client_from_state(calm_state))
        fwd = [c.forward([datum(SEQS[0])], "cross_entropy").result().loss_fn_outputs[0]["logprobs"].tolist()
               for c in (again, calm_again)]
        self.assertEqual(fwd[0], fwd[1])
        # The REST client still lists both runs.
        rest = tinker.RestClient(base_url=self.server.url, api_key="tml-" + self.server.key) \
            if hasattr(tinker, "RestClient") else sc.create_rest_client()
        runs = [r.training_run_id for r in rest.list_training_runs().result().training_runs]
        self.assertIn(calm.model_id, runs)
        self.assertIn(tc.model_id, runs)


if __name__ == "__main__":
    print(f"tinker SDK {tinker.__version__} from {os.path.dirname(tinker.__file__)}", flush=True)
    unittest.main(verbosity=2)
