"""The rest of Burst's API: files, fine-tuning jobs, sweeps, evaluations,
deployments, completions, usage (docs/api.md), in the OpenAI client's shape.

    client = burst.BurstClient(base_url="http://127.0.0.1:8000", api_key="...")
    f = client.files.create(open("train.jsonl", "rb"))
    job = client.fine_tuning.jobs.create(model="burst-small", training_file=f["id"])
    job = client.fine_tuning.jobs.wait(job["id"])
    out = client.chat.completions.create(model=job["fine_tuned_model"], messages=[...])
"""
import os
import time

from ._http import Http
from .tokenizer import Tokenizer

__all__ = ["BurstClient"]

_DONE = {"succeeded", "failed", "cancelled"}


class _Files:
    def __init__(self, http):
        self._http = http

    def create(self, file, purpose="fine-tune", filename=None):
        content = file.read() if hasattr(file, "read") else open(file, "rb").read()
        name = filename or os.path.basename(getattr(file, "name", None) or str(file))
        return self._http.upload("/v1/files", {"purpose": purpose}, "file", name, content)

    def list(self):
        return self._http.get("/v1/files")

    def retrieve(self, file_id):
        return self._http.get(f"/v1/files/{file_id}")

    def content(self, file_id):
        return self._http.request("GET", f"/v1/files/{file_id}/content", raw=True)

    def delete(self, file_id):
        return self._http.delete(f"/v1/files/{file_id}")


class _Jobs:
    def __init__(self, http, base="/v1/fine_tuning/jobs"):
        self._http, self._base = http, base

    def create(self, **body):
        return self._http.post(self._base, body)

    def estimate(self, **body):
        return self._http.post("/v1/fine_tuning/jobs/estimate", body)

    def list(self, limit=20):
        return self._http.get(f"{self._base}?limit={limit}")

    def retrieve(self, job_id):
        return self._http.get(f"{self._base}/{job_id}")

    def cancel(self, job_id):
        return self._http.post(f"{self._base}/{job_id}/cancel")

    def pause(self, job_id):
        """Stops the job after a state checkpoint; it waits, paused, for resume()."""
        return self._http.post(f"{self._base}/{job_id}/pause")

    def resume(self, job_id):
        return self._http.post(f"{self._base}/{job_id}/resume")

    def download_checkpoint(self, job_id, checkpoint):
        """A checkpoint (its ftckpt- id or step) as tar bytes: JOB-step-N/ with the
        weights, adapter_config.json, README.md (model card) and manifest.json."""
        return self._http.request("GET", f"/v1/fine_tuning/jobs/{job_id}/checkpoints/{checkpoint}/content",
                                  raw=True)

    def list_events(self, job_id):
        return self._http.get(f"{self._base}/{job_id}/events")

    def checkpoints(self, job_id):
        return self._http.get(f"/v1/fine_tuning/jobs/{job_id}/checkpoints")

    def wait(self, job_id, timeout=3600, poll_s=1.0):
        """The job once it has ended (succeeded, failed or cancelled)."""
        deadline = time.monotonic() + timeout
        while True:
            j = self.retrieve(job_id)
            if j.get("status") in _DONE:
                return j
            if time.monotonic() > deadline:
                raise TimeoutError(f"{job_id} still {j.get('status')} after {timeout} s")
            time.sleep(poll_s)


class _FineTuning:
    def __init__(self, http):
        self.jobs = _Jobs(http)


class _Sweeps:
    def __init__(self, http):
        self._http = http

    def create(self, **body):
        return self._http.post("/v1/sweeps", body)

    def list(self):
        return self._http.get("/v1/sweeps")

    def retrieve(self, sweep_id):
        return self._http.get(f"/v1/sweeps/{sweep_id}")

    def cancel(self, sweep_id):
        return self._http.post(f"/v1/sweeps/{sweep_id}/cancel")


class _Deployments:
    def __init__(self, http):
        self._http = http

    def create(self, **body):
        return self._http.post("/v1/deployments", body)

    def list(self):
        return self._http.get("/v1/deployments")

    def retrieve(self, name):
        return self._http.get(f"/v1/deployments/{name}")

    def delete(self, name):
        return self._http.delete(f"/v1/deployments/{name}")


class _Create:
    def __init__(self, http, path):
        self._http, self._path = http, path

    def create(self, **body):
        return self._http.post(self._path, body)


class _Chat:
    def __init__(self, http):
        self.completions = _Create(http, "/v1/chat/completions")


class BurstClient:
    def __init__(self, base_url="http://127.0.0.1:8000", api_key=None):
        if not api_key:
            raise ValueError("api_key is required")
        self._http = Http(base_url, api_key)
        self.files = _Files(self._http)
        self.fine_tuning = _FineTuning(self._http)
        self.sweeps = _Sweeps(self._http)
        self.evals = _Jobs(self._http, "/v1/evals")
        self.deployments = _Deployments(self._http)
        self.completions = _Create(self._http, "/v1/completions")
        self.chat = _Chat(self._http)

    def close(self):
        self._http.close()

    def models(self):
        return self._http.get("/v1/models")

    def model(self, model_id):
        return self._http.get(f"/v1/models/{model_id}")

    def delete_model(self, model_id):
        """Deletes a fine-tuned checkpoint (JOB:step-N) of a job that has ended."""
        return self._http.delete(f"/v1/models/{model_id}")

    def usage(self):
        return self._http.get("/v1/usage")

    def workers(self):
        return self._http.get("/v1/workers")

    def prices(self):
        return self._http.get("/v1/prices")

    def tokenizer(self, model):
        """`model`'s tokenizer and chat template, run by Burst (burst.Tokenizer)."""
        return Tokenizer(self._http, model)
