"""Burst's API beyond what the openai SDK covers, on the openai SDK's own
client: BurstClient is an `openai.OpenAI` pointed at Burst, so files,
fine-tuning jobs (create, list, retrieve, cancel, pause, resume, events,
checkpoints), chat and text completions and models are the SDK's own
resources; sweeps, evaluations, deployments, usage, prices, workers, a
job's cost estimate, checkpoint download and the server's tokenizer are
Burst's (docs/api.md).

    client = burst.BurstClient(base_url="http://127.0.0.1:8000", api_key="...")
    f = client.files.create(file=open("train.jsonl", "rb"), purpose="fine-tune")
    job = client.fine_tuning.jobs.create(model="burst-small", training_file=f.id)
    job = client.wait_job(job.id)
    out = client.chat.completions.create(model=job["fine_tuned_model"], messages=[...])
    client.sweeps.create(...), client.deployments.list(), client.usage()
"""
import os
import time

import openai

from .tokenizer import Tokenizer

__all__ = ["BurstClient"]

_DONE = {"succeeded", "failed", "cancelled"}


class _Resource:
    """A Burst collection under /v1: JSON in and out, through the SDK's transport
    (its retries, timeouts and errors: openai.APIStatusError and subclasses)."""

    def __init__(self, client, path):
        self._client, self._path = client, path

    def create(self, **body):
        return self._client.post(self._path, cast_to=object, body=body)

    def list(self):
        return self._client.get(self._path, cast_to=object)

    def retrieve(self, item_id):
        return self._client.get(f"{self._path}/{item_id}", cast_to=object)

    def wait(self, item_id, timeout=3600, poll_s=1.0):
        """The item once it has ended (succeeded, failed or cancelled)."""
        deadline = time.monotonic() + timeout
        while True:
            item = self.retrieve(item_id)
            if item.get("status") in _DONE:
                return item
            if time.monotonic() > deadline:
                raise TimeoutError(f"{item_id} still {item.get('status')} after {timeout} s")
            time.sleep(poll_s)


class _Cancellable(_Resource):
    def cancel(self, item_id):
        return self._client.post(f"{self._path}/{item_id}/cancel", cast_to=object)


class _Deployments(_Resource):
    def delete(self, name):
        return self._client.delete(f"{self._path}/{name}", cast_to=object)


class BurstClient(openai.OpenAI):
    def __init__(self, base_url=None, api_key=None, **kwargs):
        base = (base_url or os.environ.get("BURST_URL") or "http://127.0.0.1:8000").rstrip("/")
        api_key = api_key or os.environ.get("BURST_API_KEY")
        if not api_key:
            raise ValueError("api_key is required (or BURST_API_KEY)")
        super().__init__(base_url=base + "/v1", api_key=api_key, **kwargs)
        self.sweeps = _Cancellable(self, "/sweeps")
        # Burst's evaluations (jobs that score checkpoints against the base
        # model), not OpenAI's Evals API, which Burst does not serve.
        self.evals = _Cancellable(self, "/evals")
        self.deployments = _Deployments(self, "/deployments")

    def estimate_job(self, **body):
        """What a fine-tuning job would cost and take, without starting it."""
        return self.post("/fine_tuning/jobs/estimate", cast_to=object, body=body)

    def wait_job(self, job_id, timeout=3600, poll_s=1.0):
        """The job (a dict, Burst's fields included) once it has ended."""
        return _Resource(self, "/fine_tuning/jobs").wait(job_id, timeout, poll_s)

    def download_checkpoint(self, job_id, checkpoint):
        """A checkpoint (its ftckpt- id or step) as tar bytes: JOB-step-N/ with the
        weights, adapter_config.json, README.md (model card) and manifest.json."""
        return self.get(f"/fine_tuning/jobs/{job_id}/checkpoints/{checkpoint}/content", cast_to=bytes)

    def usage(self):
        return self.get("/usage", cast_to=object)

    def workers(self):
        return self.get("/workers", cast_to=object)

    def prices(self):
        return self.get("/prices", cast_to=object)

    def tokenizer(self, model):
        """`model`'s tokenizer and chat template, run by Burst (burst.Tokenizer)."""
        return Tokenizer(self, model)
