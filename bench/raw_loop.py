"""A training loop spoken as plain JSON on Burst's Tinker routes, for the
benchmarks that read each answer's `burst` object (request_to_result_ms,
compute_ms), which the tinker SDK does not surface, over keep-alive HTTP
(bench/keepalive_http.py). Loops for users go through the tinker SDK.
"""
from keepalive_http import Http


def datum(tokens, **inputs):
    """A Datum in the protocol's JSON: `tokens` the model input, inputs by name (lists of numbers)."""
    tensors = {}
    for name, values in inputs.items():
        values = list(values)
        dtype = "int64" if name == "target_tokens" else "float32"
        tensors[name] = {"data": values, "dtype": dtype, "shape": [len(values)]}
    return {"model_input": {"chunks": [{"type": "encoded_text", "tokens": list(tokens)}]}, "loss_fn_inputs": tensors}


class RawLoop:
    def __init__(self, url, key, model="burst-small", rank=8, seed=0):
        self.http = Http(url, key)
        self.session = self.http.post("/api/v1/create_session", {"tags": [], "user_metadata": {},
                                                                 "type": "create_session"})["session_id"]
        r = self.http.post("/api/v1/create_model", {"session_id": self.session, "model_seq_id": 0, "base_model": model,
                                                     "lora_config": {"rank": rank, "seed": seed},
                                                     "type": "create_model"})
        self.model_id = self.result(r["request_id"])["model_id"]
        self.seq = 0

    def result(self, request_id):
        """The request's answer, `burst` object included; raises on a failed request."""
        while True:
            r = self.http.post("/api/v1/retrieve_future", {"request_id": request_id})
            if r.get("type") == "try_again":
                continue
            if "error" in r:
                raise RuntimeError(f"request {request_id} failed: {r['error']}")
            return r

    def _submit(self, route, body):
        self.seq += 1
        return self.http.post(route, dict(body, model_id=self.model_id, seq_id=self.seq))["request_id"]

    def forward_backward(self, data, loss_fn="cross_entropy"):
        return self._submit("/api/v1/forward_backward", {"forward_backward_input": {"data": data, "loss_fn": loss_fn}})

    def forward(self, data, loss_fn="cross_entropy"):
        return self._submit("/api/v1/forward", {"forward_input": {"data": data, "loss_fn": loss_fn}})

    def optim_step(self, learning_rate=1e-4):
        adam = {"learning_rate": learning_rate, "beta1": 0.9, "beta2": 0.95, "eps": 1e-12}
        return self._submit("/api/v1/optim_step", {"adam_params": adam, "type": "optim_step"})

    def close(self):
        self.http.close()
