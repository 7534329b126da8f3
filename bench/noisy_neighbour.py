"""One organisation attacks `burst serve` while another works beside it, in
the same run: the other's request latency and its job's progress against
its own baseline, and the server's memory against idle.

The victim (the admin organisation) trains a LoRA job on the support data the
whole time and, in every phase, calls GET /v1/files in a loop and asks
burst-small for a short chat answer twice a second. The attacker (a second
organisation, plus clients without a key) runs one attack per phase:

  parked-loop       forward_backward requests of ~16 MiB numbered ahead of
                    their run's next seq_id (they wait), across many runs
  long-polls        80 retrieve_future long polls from two addresses, on a
                    request that never finishes
  partial-uploads   8 uploads declaring 100 MiB that send 50 MiB and then
                    trickle just above the minimum rate
  silent-conns      1,024 connections from 20 addresses that send nothing
                    (reopened as the server closes them)
  sampling          20 concurrent completions and 1,000 Tinker asample calls
  min-replicas      a deployment keeping every slot live (refused: the most
                    it may hold is then taken), called by the attacker
  metrics           requests with made-up methods and paths, without a key

Goals (docs/bench.md): the victim's p99 at most 2x its baseline, no lease
lost, no 429 it would not get alone, the server's RSS within 150 MB of idle.

Usage: /usr/bin/python3 bench/noisy_neighbour.py build/src/burst [--phase-seconds 20] [--only a,b]
Prints one JSON object (and a table on stderr).
"""

import argparse
import http.client
import json
import os
import random
import resource
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from burst_api import Api, Server, wait_for  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ATTACKS = ["parked-loop", "long-polls", "partial-uploads", "silent-conns", "sampling", "min-replicas", "metrics"]


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def pct(xs, p):
    if not xs:
        return None
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))], 2)


class Conn:
    """A kept-alive HTTP connection from a chosen source address."""

    def __init__(self, port, key=None, source="127.0.0.1", timeout=60):
        self.port, self.key, self.source, self.timeout = port, key, source, timeout
        self.c = None

    def request(self, method, path, body=None, headers=None):
        h = dict(headers or {})
        if self.key:
            h["Authorization"] = "Bearer " + self.key
        data = None
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            h.setdefault("Content-Type", "application/json")
        for attempt in range(2):
            if self.c is None:
                self.c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout,
                                                    source_address=(self.source, 0))
            try:
                self.c.request(method, path, body=data, headers=h)
                r = self.c.getresponse()
                raw = r.read()
                try:
                    out = json.loads(raw) if raw else None
                except ValueError:
                    out = None
                return r.status, out
            except (OSError, http.client.HTTPException):
                self.c.close()
                self.c = None
                if attempt == 1:
                    return -1, None
        return -1, None


class Victim:
    """The other organisation's traffic, measured per phase."""

    def __init__(self, port, key):
        self.port, self.key = port, key
        self.stop = threading.Event()
        self.files, self.chat, self.chat_queue, self.statuses = [], [], [], {}
        self.lock = threading.Lock()

    def run_files(self):
        c = Conn(self.port, self.key)
        while not self.stop.is_set():
            t0 = time.perf_counter()
            status, _ = c.request("GET", "/v1/files?limit=5")
            with self.lock:
                self.files.append((time.perf_counter() - t0) * 1000)
                self.statuses[status] = self.statuses.get(status, 0) + 1
            time.sleep(0.02)

    def run_chat(self):
        c = Conn(self.port, self.key, timeout=120)
        body = {"model": "burst-small", "messages": [{"role": "user", "content": "My card was charged twice"}],
                "max_tokens": 4, "temperature": 0}
        while not self.stop.is_set():
            t0 = time.perf_counter()
            status, out = c.request("POST", "/v1/chat/completions", body)
            with self.lock:
                self.chat.append((time.perf_counter() - t0) * 1000)
                if status == 200:  # what the server says the call waited for a worker
                    self.chat_queue.append(out.get("burst", {}).get("queue_ms", 0))
                self.statuses["chat %d" % status] = self.statuses.get("chat %d" % status, 0) + 1
            time.sleep(0.5)

    def measure(self, seconds, server_pid, job_api, job_id):
        self.stop.clear()
        self.files, self.chat, self.chat_queue, self.statuses = [], [], [], {}
        threads = [threading.Thread(target=self.run_files, daemon=True),
                   threading.Thread(target=self.run_chat, daemon=True)]
        step0 = job_api.ok("GET", "/v1/fine_tuning/jobs/" + job_id).get("step", 0)
        for t in threads:
            t.start()
        rss, end = [], time.time() + seconds
        while time.time() < end:
            rss.append(rss_kb(server_pid))
            time.sleep(0.1)
        self.stop.set()
        for t in threads:
            t.join(150)
        job = job_api.ok("GET", "/v1/fine_tuning/jobs/" + job_id)
        step1 = job.get("step", 0)
        return {"files_p50_ms": pct(self.files, 50), "files_p99_ms": pct(self.files, 99),
                "chat_p50_ms": pct(self.chat, 50), "chat_p99_ms": pct(self.chat, 99),
                "chat_ms": [round(x) for x in self.chat],
                "chat_queue_p99_ms": pct(self.chat_queue, 99),
                "statuses": {str(k): v for k, v in sorted(self.statuses.items(), key=str)},
                "job_steps_per_s": round((step1 - step0) / seconds, 3), "job_status": job.get("status"),
                "job_attempts": len(job.get("attempts", [])),
                "rss_max_mb": round(max(rss) / 1024.0, 1)}


# ---- attacks: each starts its load and returns a function that stops it ----

def low_priority():
    """The attacker's client threads run at the lowest CPU priority: on this
    one machine they stand for clients elsewhere, so what competes with the
    victim is the server's work for them, not their own."""
    os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)


def stoppable(target, n=1):
    stop = threading.Event()

    def run(stop, i):
        low_priority()
        target(stop, i)
    threads = [threading.Thread(target=run, args=(stop, i), daemon=True) for i in range(n)]
    for t in threads:
        t.start()

    def end():
        stop.set()
        for t in threads:
            t.join(60)
    return end


def attack_parked_loop(port, key, report):
    # ~7.5 MiB of JSON (the route takes 8): long decimal weights, as a careless client sends them.
    tokens = [random.randrange(1, 300) for _ in range(401)]
    datum = {"model_input": {"chunks": [{"tokens": tokens[:400], "type": "encoded_text"}]},
             "loss_fn_inputs": {"target_tokens": {"data": tokens[1:401], "dtype": "int64", "shape": [400]},
                                "weights": {"data": [0.30000000000000004] * 400, "dtype": "float32", "shape": [400]}}}
    body = json.dumps({"forward_backward_input": {"data": [datum] * 640, "loss_fn": "cross_entropy"},
                       "model_id": "", "seq_id": 0}).encode()
    report["body_mb"] = round(len(body) / 2**20, 1)
    report["accepted"], report["refused"] = 0, {}

    def send(stop, i):  # during the measured phase: its parsing counts too
        c = Conn(port, key)
        _, s = c.request("POST", "/api/v1/create_session", {"tags": [], "user_metadata": {}, "sdk_version": "0.25.0"})
        refused = report["refused"]
        for m in range(40):
            if stop.is_set():
                return
            st, _ = c.request("POST", "/api/v1/create_model", {"session_id": s["session_id"], "model_seq_id": m,
                                                                "base_model": "burst-small", "lora_config": {"rank": 4}})
            if st != 200:
                refused["create_model %d" % st] = refused.get("create_model %d" % st, 0) + 1
                continue
            run = "%s-train-%d" % (s["session_id"], m)
            for seq in range(2, 10):  # seq_id 1 never comes: they all wait
                b = body.replace(b'"model_id": ""', ('"model_id": "%s"' % run).encode()).replace(
                    b'"seq_id": 0', b'"seq_id": %d' % seq)
                st, _ = c.request("POST", "/api/v1/forward_backward", b)
                if st == 200:
                    report["accepted"] += 1
                else:
                    refused[str(st)] = refused.get(str(st), 0) + 1
                    break
    return stoppable(send, 1)


def attack_long_polls(port, key, report):
    c = Conn(port, key)
    st, s = c.request("POST", "/api/v1/create_session", {"tags": [], "user_metadata": {}, "sdk_version": "0.25.0"})
    if st != 200:
        raise RuntimeError("create_session: %s %s" % (st, s))
    c.request("POST", "/api/v1/create_model", {"session_id": s["session_id"], "model_seq_id": 0,
                                              "base_model": "burst-small", "lora_config": {"rank": 4}})
    run = s["session_id"] + "-train-0"
    _, f = c.request("POST", "/api/v1/optim_step", {"model_id": run, "seq_id": 5, "adam_params": {"learning_rate": 1e-4}})
    future = f["request_id"]  # waits for seq_id 1..4, which never come
    counts = {}

    def poll(stop, i):
        p = Conn(port, key, source="127.0.0.%d" % (2 + i % 2), timeout=60)
        while not stop.is_set():
            st, _ = p.request("POST", "/api/v1/retrieve_future", {"request_id": future})
            counts[st] = counts.get(st, 0) + 1
            if st != 200:
                time.sleep(0.2)
    end = stoppable(poll, 80)
    report["answers"] = counts
    return end


def attack_partial_uploads(port, key, report):
    socks = []
    head = ("POST /v1/files HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
            "Content-Type: multipart/form-data; boundary=xx\r\nContent-Length: %d\r\n\r\n" % (key, 100 << 20)).encode()
    chunk = b"x" * (1 << 20)
    answers = {}

    def upload(stop, i):
        s = socket.create_connection(("127.0.0.1", port))
        socks.append(s)
        try:
            s.sendall(head)
            for _ in range(50):
                s.sendall(chunk)
            while not stop.is_set():  # just above the minimum rate (16 KiB/s)
                s.sendall(b"x" * 24 * 1024)
                time.sleep(1)
        except OSError:
            try:
                answers[s.recv(12).decode(errors="replace")] = answers.get("refused", 0) + 1
            except OSError:
                pass
        s.close()
    end = stoppable(upload, 8)
    report["answers"] = answers
    return end


def attack_silent_conns(port, key, report):
    resource.setrlimit(resource.RLIMIT_NOFILE, (8192, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    stats = {"opened": 0, "closed_by_server": 0}

    def hold(stop, i):
        source = "127.0.1.%d" % (1 + i)
        conns = []
        while not stop.is_set():
            while len(conns) < 52:
                try:
                    conns.append(socket.create_connection(("127.0.0.1", port), timeout=2, source_address=(source, 0)))
                    stats["opened"] += 1
                except OSError:
                    break
            time.sleep(2)
            alive = []
            for s in conns:
                s.setblocking(False)
                try:
                    gone = s.recv(1) == b""
                except BlockingIOError:
                    gone = False
                except OSError:
                    gone = True
                if gone:
                    stats["closed_by_server"] += 1
                    s.close()
                else:
                    alive.append(s)
            conns = alive
        for s in conns:
            s.close()
    end = stoppable(hold, 20)
    report["connections"] = stats
    return end


def attack_sampling(port, key, report):
    counts = {}

    def complete(stop, i):
        c = Conn(port, key, timeout=120)
        while not stop.is_set():
            st, _ = c.request("POST", "/v1/completions", {"model": "burst-small", "prompt": "A dog %d is" % i,
                                                          "max_tokens": 64, "temperature": 1.0})
            counts["completions %d" % st] = counts.get("completions %d" % st, 0) + 1
            if st != 200:
                time.sleep(0.5)

    def asample(stop, i):
        c = Conn(port, key)
        for k in range(50):
            if stop.is_set():
                return
            st, _ = c.request("POST", "/api/v1/asample", {
                "base_model": "burst-small", "num_samples": 1, "sampling_params": {"max_tokens": 16},
                "prompt": {"chunks": [{"type": "encoded_text", "tokens": [1, 5 + i, 9 + k]}]}})
            counts["asample %d" % st] = counts.get("asample %d" % st, 0) + 1
    end1 = stoppable(complete, 20)
    end2 = stoppable(asample, 20)
    report["answers"] = counts

    def end():
        end1()
        end2()
    return end


def attack_min_replicas(port, key, report, slots, checkpoint):
    c = Conn(port, key)
    st, out = c.request("POST", "/v1/deployments", {"name": "hog", "checkpoint": checkpoint, "min_replicas": slots,
                                                     "max_replicas": slots})
    report["all_slots"] = st
    allowed = slots // 2
    st, out = c.request("POST", "/v1/deployments", {"name": "hog2", "checkpoint": checkpoint,
                                                     "min_replicas": allowed, "max_replicas": allowed})
    report["allowed_min_replicas"] = allowed
    report["allowed_status"] = st

    def call(stop, i):
        k = Conn(port, key, timeout=120)
        while not stop.is_set():
            k.request("POST", "/v1/chat/completions", {"model": "hog2", "max_tokens": 32,
                                                        "messages": [{"role": "user", "content": "hi"}]})
    end = stoppable(call, 4)

    def stop():
        end()
        c.request("DELETE", "/v1/deployments/hog2")
    return stop


def attack_metrics(port, key, report):
    sent = {"n": 0}

    def junk(stop, i):
        rnd = random.Random(i)
        while not stop.is_set():
            try:
                s = socket.create_connection(("127.0.0.1", port), timeout=5)
                method = "".join(rnd.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ") for _ in range(8))
                s.sendall(("%s /x%d HTTP/1.1\r\nHost: x\r\n\r\n" % (method, rnd.randrange(10**9))).encode())
                s.recv(4096)
                s.close()
                sent["n"] += 1
            except OSError:
                time.sleep(0.05)
    end = stoppable(junk, 4)
    report["requests"] = sent
    return end


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("burst")
    ap.add_argument("--phase-seconds", type=float, default=20)
    ap.add_argument("--slots", type=int, default=3)
    ap.add_argument("--only", default=",".join(ATTACKS))
    args = ap.parse_args()
    data = tempfile.mkdtemp(prefix="burst-noisy-")
    srv = Server(os.path.abspath(args.burst), data, window=300, slots=args.slots, threads_per_slot=1)
    results = {"slots": args.slots, "phase_seconds": args.phase_seconds, "phases": {}}
    try:
        port = int(srv.url.rsplit(":", 1)[1].strip("/"))
        victim_api = Api(srv.url, srv.key)
        def new_org(name):
            made = subprocess.run([args.burst, "orgs", "create", name, "--data", data, "--json"],
                                  capture_output=True, text=True, check=True)
            return json.loads(made.stdout)["api_key"]
        with open(os.path.join(ROOT, "examples/support/train.jsonl"), "rb") as f:
            train = victim_api.upload("train.jsonl", f.read())
        recipe = json.load(open(os.path.join(ROOT, "examples/support/sweep_recipe.json")))
        recipe.update({"epochs": 100, "checkpoint_every": 1000, "eval_every": 100000})
        recipe.pop("train_file", None)
        recipe.pop("valid_file", None)
        job = victim_api.ok("POST", "/v1/fine_tuning/jobs", {"model": "burst-small", "training_file": train,
                                                             "recipe": recipe})
        wait_for("the victim's job to train", lambda: victim_api.ok(
            "GET", "/v1/fine_tuning/jobs/" + job["id"]).get("step", 0) > 5, 180, 0.5)
        victim = Victim(port, srv.key)
        victim.measure(5, srv.proc.pid, victim_api, job["id"])  # warm: the chat's worker starts
        idle_rss = rss_kb(srv.proc.pid) / 1024.0
        results["idle_rss_mb"] = round(idle_rss, 1)
        results["phases"]["baseline"] = victim.measure(args.phase_seconds, srv.proc.pid, victim_api, job["id"])
        for name in args.only.split(","):
            report = {}
            attacker_key = new_org("attacker-" + name)  # what one attack left holds nothing of the next
            if name == "min-replicas":
                stop = attack_min_replicas(port, attacker_key, report, args.slots, "burst-small")
            else:
                stop = globals()["attack_" + name.replace("-", "_")](port, attacker_key, report)
            m = victim.measure(args.phase_seconds, srv.proc.pid, victim_api, job["id"])
            stop()
            m["attack"] = report
            results["phases"][name] = m
            print(name, json.dumps(m), file=sys.stderr, flush=True)
            time.sleep(2)
        # The baseline again, after every attack: how much the quiet phase moves by itself.
        results["phases"]["baseline-after"] = victim.measure(args.phase_seconds, srv.proc.pid, victim_api, job["id"])
        final = victim_api.ok("GET", "/v1/fine_tuning/jobs/" + job["id"])
        results["victim_job_attempts"] = final.get("attempts", [])
        victim_api.call("POST", "/v1/fine_tuning/jobs/%s/cancel" % job["id"])
    finally:
        srv.stop()
    base = results["phases"]["baseline"]
    print("%-16s %10s %10s %10s %10s %8s %8s  %s" % ("phase", "files p50", "files p99", "chat p50", "chat p99",
                                                      "steps/s", "RSS MB", "victim statuses"), file=sys.stderr)
    for name, m in results["phases"].items():
        print("%-16s %10s %10s %10s %10s %8s %8s  %s" % (name, m["files_p50_ms"], m["files_p99_ms"], m["chat_p50_ms"],
                                                         m["chat_p99_ms"], m["job_steps_per_s"], m["rss_max_mb"],
                                                         m["statuses"]), file=sys.stderr)
        if not name.startswith("baseline"):
            m["files_p99_ratio"] = round(m["files_p99_ms"] / base["files_p99_ms"], 2)
            m["chat_p99_ratio"] = round(m["chat_p99_ms"] / base["chat_p99_ms"], 2) if m["chat_p99_ms"] else None
            m["rss_over_idle_mb"] = round(m["rss_max_mb"] - results["idle_rss_mb"], 1)
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
