"""What the tinker SDK tests share: the client a create_* call made, and a
checkpoint's adapter bytes as Burst's archive link serves them."""
import io
import tarfile
import urllib.request

import tinker

from burst_api import Api  # bench/burst_api.py


def client(made):
    """The client a create_* call made: 0.38 returns a future of it (using the
    future as the client is deprecated there), 0.25.0 the client itself."""
    future = type(made).__name__.endswith("Future")  # 0.38's BackcompatTrainingClientFuture & co
    return made.result() if future or not isinstance(made, (tinker.TrainingClient, tinker.SamplingClient)) else made


def sampler_adapter(server, run, name):
    """adapter_model.safetensors of sampler weights, through the archive link (0.25.0's download)."""
    code, body = Api(server.url, server.key).call(
        "GET", f"/api/v1/training_runs/{run}/checkpoints/sampler_weights/{name}/archive")
    if code != 200:
        raise AssertionError(f"archive link of {run}/{name}: HTTP {code} {body}")
    with urllib.request.urlopen(body["url"]) as r:
        with tarfile.open(fileobj=io.BytesIO(r.read())) as tar:
            return tar.extractfile("adapter_model.safetensors").read()
