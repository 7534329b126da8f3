"""Training loops on Burst, with the tinker SDK's names.

    import burst as tinker          # the one line a cookbook loop changes
    sc = tinker.ServiceClient(base_url="http://127.0.0.1:8000", api_key="tml-...")
    tc = sc.create_lora_training_client(base_model="burst-small", rank=8)
    fb = tc.forward_backward(data, "cross_entropy")     # submitted at once
    op = tc.optim_step(tinker.AdamParams(learning_rate=1e-4))
    print(fb.result().metrics, op.result().metrics)
    sampler = tc.save_weights_and_get_sampling_client("step-1")
    out = sampler.sample(prompt, num_samples=4, sampling_params=...).result()

Requests go out when called and return futures; a run executes them in
the order they were made (seq_id), so forward_backward and optim_step can be
pipelined. Results come from /api/v1/retrieve_future (long-polled).
"""
import threading
import time

from . import types
from ._http import APIError, Http

__all__ = ["APIFuture", "RequestFailedError", "RestClient", "SamplingClient", "ServiceClient", "Tokenizer",
           "TrainingClient"]


class RequestFailedError(Exception):
    """A request Burst accepted but could not carry out ("user": the request was wrong)."""

    def __init__(self, message, category):
        super().__init__(message)
        self.category = category


class APIFuture:
    """A request's result, fetched on .result()."""

    def __init__(self, http, request_id, parse):
        self._http, self.request_id, self._parse = http, request_id, parse
        self._done, self._value, self._lock = False, None, threading.Lock()

    def result(self, timeout=None):
        with self._lock:
            deadline = None if timeout is None else time.monotonic() + timeout
            while not self._done:
                r = self._http.post("/api/v1/retrieve_future", {"request_id": self.request_id})
                if isinstance(r, dict) and r.get("type") == "try_again":
                    if deadline is not None and time.monotonic() > deadline:
                        raise TimeoutError(f"request {self.request_id} not done within {timeout} s")
                    continue
                if isinstance(r, dict) and "error" in r:
                    raise RequestFailedError(f"request {self.request_id} failed: {r['error']}", r.get("category"))
                self._value, self._done = self._parse(r), True
            return self._value


class Tokenizer:
    """A base model's tokenizer, run by the server (/v1/tokenize)."""

    def __init__(self, http, model):
        self._http, self.model = http, model

    def encode(self, text, add_special_tokens=False):
        return self._http.post("/v1/tokenize", {"model": self.model, "text": text,
                                                "allow_special": bool(add_special_tokens)})["tokens"]

    def decode(self, tokens, skip_special_tokens=False):
        return self._http.post("/v1/detokenize", {"model": self.model, "tokens": list(tokens),
                                                  "skip_special": bool(skip_special_tokens)})["text"]

    def render_chat(self, messages, add_generation_prompt=False):
        """{tokens, weights, prompt_tokens, end_of_turn}: the model's chat template, loss weights on the assistant."""
        return self._http.post("/v1/tokenize", {"model": self.model, "messages": messages,
                                                "add_generation_prompt": add_generation_prompt})

    def apply_chat_template(self, messages, add_generation_prompt=False, tokenize=True):
        return self.render_chat(messages, add_generation_prompt)["tokens"]


def _output(r):
    return types.ForwardBackwardOutput.from_json(r)


class TrainingClient:
    def __init__(self, service, model_id, base_model):
        self._service, self._http = service, service._http
        self.model_id, self.base_model = model_id, base_model
        self._seq, self._seq_lock = 0, threading.Lock()

    def _submit(self, path, body, parse):
        with self._seq_lock:
            self._seq += 1
            body = dict(body, model_id=self.model_id, seq_id=self._seq)
            r = self._http.post(path, body)  # retried with the same seq_id: applied once
        return APIFuture(self._http, r["request_id"], parse)

    def forward_backward(self, data, loss_fn, loss_fn_config=None):
        inp = {"data": [d.to_json() for d in data], "loss_fn": loss_fn}
        if loss_fn_config:
            inp["loss_fn_config"] = loss_fn_config
        return self._submit("/api/v1/forward_backward", {"forward_backward_input": inp}, _output)

    def forward(self, data, loss_fn="cross_entropy", loss_fn_config=None):
        inp = {"data": [d.to_json() for d in data], "loss_fn": loss_fn}
        if loss_fn_config:
            inp["loss_fn_config"] = loss_fn_config
        return self._submit("/api/v1/forward", {"forward_input": inp}, _output)

    def optim_step(self, adam_params=None):
        adam = (adam_params or types.AdamParams()).to_json()
        return self._submit("/api/v1/optim_step", {"adam_params": adam, "type": "optim_step"},
                            lambda r: types.OptimStepResponse(metrics=r.get("metrics")))

    def save_state(self, name, ttl_seconds=None):
        body = {"path": name, "overwrite": False, "type": "save_weights"}
        if ttl_seconds:
            body["ttl_seconds"] = ttl_seconds
        return self._submit("/api/v1/save_weights", body, lambda r: types.SaveWeightsResponse(path=r["path"]))

    def load_state(self, path):
        return self._submit("/api/v1/load_weights", {"path": path, "optimizer": False, "type": "load_weights"},
                            lambda r: r)

    def load_state_with_optimizer(self, path):
        return self._submit("/api/v1/load_weights", {"path": path, "optimizer": True, "type": "load_weights"},
                            lambda r: r)

    def save_weights_for_sampler(self, name, ttl_seconds=None):
        body = {"path": name, "type": "save_weights_for_sampler"}
        if ttl_seconds:
            body["ttl_seconds"] = ttl_seconds
        return self._submit("/api/v1/save_weights_for_sampler", body,
                            lambda r: types.SaveWeightsForSamplerResponse(path=r.get("path")))

    def save_weights_and_get_sampling_client(self, name=None):
        if name is not None:
            path = self.save_weights_for_sampler(name).result().path
            return self._service.create_sampling_client(model_path=path)
        seq = self._service._next_sampler_seq()
        f = self._submit("/api/v1/save_weights_for_sampler",
                         {"sampling_session_seq_id": seq, "type": "save_weights_for_sampler"},
                         lambda r: r["sampling_session_id"])
        return SamplingClient(self._http, f.result(), self.base_model)

    def create_sampling_client(self, model_path):
        return self._service.create_sampling_client(model_path=model_path)

    def get_info(self):
        return self._http.post("/api/v1/get_info", {"model_id": self.model_id, "type": "get_info"})

    def get_tokenizer(self):
        return Tokenizer(self._http, self.base_model)


class SamplingClient:
    def __init__(self, http, sampling_session_id, base_model=None):
        self._http, self.sampling_session_id, self.base_model = http, sampling_session_id, base_model
        self._seq, self._seq_lock = 0, threading.Lock()

    def sample(self, prompt, num_samples=1, sampling_params=None, include_prompt_logprobs=False,
               topk_prompt_logprobs=0):
        with self._seq_lock:
            seq, self._seq = self._seq, self._seq + 1
        body = {"num_samples": num_samples, "prompt": prompt.to_json(),
                "sampling_params": (sampling_params or types.SamplingParams()).to_json(),
                "sampling_session_id": self.sampling_session_id, "seq_id": seq,
                "prompt_logprobs": include_prompt_logprobs, "topk_prompt_logprobs": topk_prompt_logprobs,
                "type": "sample"}
        r = self._http.post("/api/v1/asample", body)
        return APIFuture(self._http, r["request_id"], types.SampleResponse.from_json)

    def compute_logprobs(self, prompt):
        f = self.sample(prompt, 1, types.SamplingParams(max_tokens=1), include_prompt_logprobs=True)

        class _Logprobs:
            def result(self, timeout=None):
                return f.result(timeout).prompt_logprobs
        return _Logprobs()

    def get_tokenizer(self):
        if self.base_model is None:
            self.base_model = self._http.get(f"/api/v1/samplers/{self.sampling_session_id}")["base_model"]
        return Tokenizer(self._http, self.base_model)


class RestClient:
    """Training runs and their checkpoints."""

    def __init__(self, http):
        self._http = http

    def list_training_runs(self, limit=20, offset=0):
        return self._http.get(f"/api/v1/training_runs?limit={limit}&offset={offset}&access_scope=owned")

    def get_training_run(self, training_run_id):
        return self._http.get(f"/api/v1/training_runs/{training_run_id}")

    def list_checkpoints(self, training_run_id):
        return self._http.get(f"/api/v1/training_runs/{training_run_id}/checkpoints")["checkpoints"]

    def delete_checkpoint(self, training_run_id, checkpoint_id):
        return self._http.delete(f"/api/v1/training_runs/{training_run_id}/checkpoints/{checkpoint_id}")

    def set_checkpoint_ttl(self, training_run_id, checkpoint_id, ttl_seconds):
        return self._http.put(f"/api/v1/training_runs/{training_run_id}/checkpoints/{checkpoint_id}/ttl",
                              {"ttl_seconds": ttl_seconds})

    def get_checkpoint_archive_url(self, training_run_id, checkpoint_id):
        return self._http.get(f"/api/v1/training_runs/{training_run_id}/checkpoints/{checkpoint_id}/archive")

    def download_checkpoint_archive(self, training_run_id, checkpoint_id):
        """The checkpoint's files as a tar (bytes)."""
        url = self.get_checkpoint_archive_url(training_run_id, checkpoint_id)["url"]
        return self._http.request("GET", "/api/v1/archives/" + url.rsplit("/", 1)[1], raw=True)


class ServiceClient:
    def __init__(self, base_url="http://127.0.0.1:8000", api_key=None, heartbeat_s=10.0):
        if not api_key:
            raise ValueError("api_key is required (a Burst API key, with or without the tml- prefix)")
        self._http = Http(base_url, api_key)
        self._http.post("/api/v1/client/config", {"sdk_version": "burst-python"})
        self.session_id = self._http.post("/api/v1/create_session", {"tags": [], "user_metadata": {},
                                                                     "type": "create_session"})["session_id"]
        self._models = 0
        self._samplers = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        t = threading.Thread(target=self._heartbeat, args=(heartbeat_s,), daemon=True)
        t.start()

    def _heartbeat(self, every):
        hb = Http(self._http.base_url, self._http.api_key, timeout=10, max_retries=0)
        while not self._stop.wait(every):
            try:
                hb.post("/api/v1/session_heartbeat", {"session_id": self.session_id, "type": "session_heartbeat"})
            except APIError:
                pass  # a missed heartbeat is not an error for the loop

    def _next_sampler_seq(self):
        with self._lock:
            seq, self._samplers = self._samplers, self._samplers + 1
        return seq

    def close(self):
        self._stop.set()
        self._http.close()

    def get_server_capabilities(self):
        return self._http.get("/api/v1/get_server_capabilities")

    def create_lora_training_client(self, base_model, rank=32, seed=None, train_mlp=True, train_attn=True,
                                    train_unembed=True, user_metadata=None):
        with self._lock:
            seq, self._models = self._models, self._models + 1
        lora = {"rank": rank, "train_mlp": train_mlp, "train_attn": train_attn, "train_unembed": train_unembed}
        if seed is not None:
            lora["seed"] = seed
        body = {"session_id": self.session_id, "model_seq_id": seq, "base_model": base_model, "lora_config": lora,
                "type": "create_model"}
        r = self._http.post("/api/v1/create_model", body)
        model_id = APIFuture(self._http, r["request_id"], lambda x: x["model_id"]).result()
        return TrainingClient(self, model_id, base_model)

    def create_sampling_client(self, model_path=None, base_model=None):
        if not model_path and not base_model:
            raise ValueError("give model_path (tinker://...) or base_model")
        body = {"session_id": self.session_id, "sampling_session_seq_id": self._next_sampler_seq(),
                "type": "create_sampling_session"}
        body["model_path" if model_path else "base_model"] = model_path or base_model
        sid = self._http.post("/api/v1/create_sampling_session", body)["sampling_session_id"]
        return SamplingClient(self._http, sid, base_model)

    def create_rest_client(self):
        return RestClient(self._http)
