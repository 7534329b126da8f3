#!/usr/bin/env python3
"""The GPU check's system stage (scripts/gpu-system-check.sh): the whole of
Burst as a user runs it, on the lent machine's GPU.

`burst serve --gpus all` with a 1B-shaped model in its catalog; a LoRA job
on a GPU from zero to its last checkpoint; the same job again with its
worker killed (SIGKILL) after a checkpoint, whose resumed run must give the
same adapter bytes; the checkpoint deployed on a GPU and 16 calls to it at
once. Each stage prints one JSON line (stage, figures or error); the last
line sums them up. Standard library only: the machine has no network.

  gpu_system.py --burst BIN --work DIR --device cuda|cpu [--preset P]

With --device cpu (a rehearsal where there is no GPU) the same stages run
on CPU slots (`--gpus none`, no "gpu" in the requests) on a small preset.
"""
import argparse
import concurrent.futures
import glob
import hashlib
import json
import os
import signal
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from burst_api import Api, Server  # noqa: E402  (bench/burst_api.py: the client and `burst serve`)


def emit(stage, **fields):
    fields["stage"] = stage
    print(json.dumps(fields), flush=True)
    return fields


def supervised_loop(server, model, steps, batch=8):
    """forward_backward + optim_step on batches of support tickets (the chat
    template rendered by the server, loss on the answer): each step's loss per ticket."""
    from raw_loop import RawLoop, datum
    api = Api(server.url, server.key)
    with open(os.path.join(ROOT, "examples", "support", "train.jsonl")) as f:
        rows = [json.loads(line) for _, line in zip(range(steps * batch), f)]
    data = []
    for r in rows:
        t = api.ok("POST", "/v1/tokenize", {"model": model, "messages": r["messages"]})
        data.append(datum(t["tokens"][:-1], target_tokens=t["tokens"][1:], weights=t["weights"][1:]))
    loop = RawLoop(server.url, server.key, model=model, rank=8, seed=0)
    losses = []
    for i in range(steps):
        fb = loop.forward_backward(data[i * batch:(i + 1) * batch])
        loop.result(loop.optim_step(2e-3))
        losses.append(loop.result(fb)["metrics"]["loss:sum"] / batch)
    loop.close()
    return losses


def wait_job(api, job_id, limit_s, on_poll=None):
    deadline = time.time() + limit_s
    while time.time() < deadline:
        j = api.ok("GET", f"/v1/fine_tuning/jobs/{job_id}")
        if j["status"] in ("succeeded", "failed", "cancelled"):
            return j
        if on_poll:
            on_poll(j)
        time.sleep(0.2)
    raise RuntimeError(f"{job_id} did not finish in {limit_s} s (last: {j['status']})")


def adapter_digest(data, job_id, step):
    files = sorted(glob.glob(os.path.join(data, "store", "**", "jobs", job_id, "checkpoints",
                                          f"step-{step:08d}", "sampler", "*.safetensors"), recursive=True))
    if not files:
        raise RuntimeError(f"no sampler weights of {job_id} step {step} under {data}/store")
    h = hashlib.sha256()
    for path in files:
        with open(path, "rb") as f:
            h.update(f.read())
    return h.hexdigest()


def base_dtype(data, job_id):
    """The frozen base's dtype that the job's run.json records (None if none is found)."""
    for path in glob.glob(os.path.join(data, "**", job_id, "**", "run.json"), recursive=True):
        with open(path) as f:
            return json.load(f).get("base_dtype")
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--burst", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--device", choices=["cuda", "cpu"], required=True)
    ap.add_argument("--preset", default="")
    ap.add_argument("--steps", type=int, default=0)
    a = ap.parse_args()
    gpu = a.device == "cuda"
    preset = a.preset or ("llama3.2-1b" if gpu else "small")
    steps = a.steps or (40 if gpu else 60)
    every = max(1, steps // 4)
    models, data = os.path.join(a.work, "models"), os.path.join(a.work, "data")
    os.makedirs(models, exist_ok=True)
    results = []
    t0 = time.time()
    r = subprocess.run([a.burst, "init-model", "--preset", preset, "--out", os.path.join(models, "sys"),
                        "--tokenizer", os.path.join(ROOT, "models", "burst-small", "tokenizer.model"),
                        "--dtype", "bfloat16" if gpu else "float32"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        emit("system_init_model", error=r.stdout[-800:] + r.stderr[-800:])
        return 1
    results.append(emit("system_init_model", ok=True, preset=preset, seconds=round(time.time() - t0, 1),
                        said=r.stdout.strip()[-300:]))
    if gpu:
        # Its catalog entry: sampling calls and training loops on it run on a GPU.
        with open(os.path.join(models, "sys.model.json"), "w") as f:
            json.dump({"gpu": "any"}, f)
    try:
        server = Server(a.burst, data, window=120, slots=2, threads_per_slot=2,
                        extra=["--model-root", models, "--gpus", "all" if gpu else "none"])
    except RuntimeError as e:
        emit("system_serve", error=str(e)[-2000:])
        return 1
    s = Api(server.url, server.key)
    try:
        pool = s.ok("GET", "/v1/workers")
        results.append(emit("system_serve", ok=True, gpus=pool.get("gpus"), slots=pool.get("slots"),
                            said=[l for l in server.lines if "GPUs" in l or " slot" in l][:3]))
        with open(os.path.join(ROOT, "examples", "support", "train.jsonl"), "rb") as f:
            file_id = s.upload("train.jsonl", f.read())
        body = {"model": "sys", "training_file": file_id,
                "hyperparameters": {"n_epochs": 50, "batch_size": 4},
                "recipe": {"max_steps": steps, "checkpoint_every": every, "seed": 7, "max_seq_len": 256}}
        if gpu:
            body["gpu"] = "any"
        # The run without a fault: its time, and the bytes to match.
        t = time.time()
        a_job = s.ok("POST", "/v1/fine_tuning/jobs", body)
        a_done = wait_job(s, a_job["id"], 600)
        if a_done["status"] != "succeeded":
            raise RuntimeError(f"job {a_job['id']} {a_done['status']}: {json.dumps(a_done.get('error'))}")
        final_step = int(a_done["fine_tuned_model"].rsplit("step-", 1)[1])
        clean = adapter_digest(data, a_job["id"], final_step)
        results.append(emit("system_lora_job", ok=True, job=a_job["id"], steps=final_step,
                            seconds=round(time.time() - t, 1),
                            trained_tokens=a_done.get("trained_tokens"), device=a_done.get("gpu"),
                            base_dtype=base_dtype(data, a_job["id"]), usage=a_done.get("usage")))
        # The same job, its worker killed after its first checkpoint.
        b_job = s.ok("POST", "/v1/fine_tuning/jobs", dict(body, suffix="killed"))
        killed = {}

        def kill_after_checkpoint(j):
            if killed or j["status"] != "running":
                return
            if not s.ok("GET", f"/v1/fine_tuning/jobs/{b_job['id']}/checkpoints")["data"]:
                return
            for w in s.ok("GET", "/v1/workers")["data"]:
                if w.get("job") == b_job["id"] and w.get("pid"):
                    os.kill(int(w["pid"]), signal.SIGKILL)
                    killed.update(worker=w["id"], at=time.time())

        b_done = wait_job(s, b_job["id"], 900, kill_after_checkpoint)
        resumed = adapter_digest(data, b_job["id"], final_step) if b_done["status"] == "succeeded" else ""
        attempts = [x.get("outcome") for x in b_done.get("attempts", [])]
        same = resumed == clean
        results.append(emit("system_kill_resume", ok=bool(killed) and same, killed=bool(killed),
                            attempts=attempts, same_adapter=same, status=b_done["status"]))
        # The checkpoint deployed on a GPU, 16 calls at once.
        dep = {"name": "sys-dep", "checkpoint": a_done["fine_tuned_model"], "min_replicas": 1,
               "max_concurrency": 16}
        if gpu:
            dep["gpu"] = "any"
        s.ok("POST", "/v1/deployments", dep)
        t = time.time()
        while time.time() - t < 300:
            d = s.ok("GET", "/v1/deployments/sys-dep")
            if d.get("ready_replicas", 0) > 0:
                break
            time.sleep(0.5)
        ready_s = time.time() - t

        def one(i):
            t1 = time.time()
            j = s.ok("POST", "/v1/completions", {"model": "sys-dep", "prompt": f"Ticket {i}: my invoice",
                                                 "max_tokens": 32, "temperature": 0}, timeout=600)
            return time.time() - t1, j["usage"]["completion_tokens"]

        t = time.time()
        with concurrent.futures.ThreadPoolExecutor(16) as pool_:
            calls = list(pool_.map(one, range(16)))
        wall = time.time() - t
        tokens = sum(c[1] for c in calls)
        results.append(emit("system_deployment", ok=True, replica_ready_s=round(ready_s, 1), calls=16,
                            wall_s=round(wall, 2), tokens=tokens, tokens_per_s=round(tokens / wall, 1),
                            slowest_call_s=round(max(c[0] for c in calls), 2),
                            replicas=[{"device": r.get("device"), "ready": r.get("ready")} for r in
                                      s.ok("GET", "/v1/deployments/sys-dep").get("replica_workers", [])]))
        s.ok("DELETE", "/v1/deployments/sys-dep")
        # A training loop through the Tinker protocol on the same model, in the
        # protocol's plain JSON (bench/raw_loop.py: this machine has no tinker SDK).
        t = time.time()
        loop_steps = 20
        try:
            losses = supervised_loop(server, "sys", loop_steps)
            said = {"first_loss": round(losses[0], 4), "last_loss": round(losses[-1], 4)}
            loop_ok, loop_error = losses[-1] < losses[0], None
        except Exception as e:  # noqa: BLE001 - the stage's finding
            said, loop_ok, loop_error = {}, False, str(e)[-1500:]
        loop_workers = [w.get("device") for w in s.ok("GET", "/v1/workers")["data"] if w.get("state") != "exited"]
        results.append(emit("system_loop", ok=loop_ok, steps=loop_steps, seconds=round(time.time() - t, 1),
                            worker_devices=loop_workers, **said,
                            **({} if loop_error is None else {"error": loop_error})))
    except Exception as e:  # noqa: BLE001 - every failure is the stage's finding
        results.append(emit("system_error", error=str(e)[-2000:], server_log="\n".join(server.lines[-20:])))
    finally:
        server.stop()
    ok = all(r.get("ok") for r in results) and not any("error" in r for r in results)
    emit("system", ok=ok, seconds=round(time.time() - t0, 1), stages=[r["stage"] for r in results])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
